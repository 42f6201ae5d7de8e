/* The portable kernel table: target "generic", and the oracle of the others. */
#include "kernel_table.h"

const rt_kernels rt_kernels_generic = {"generic", 8, 4, 4, 0, 0, NULL, NULL, NULL};
