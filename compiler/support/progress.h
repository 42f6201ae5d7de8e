/* Progress reports of long phases. */
#ifndef LLMC_PROGRESS_H
#define LLMC_PROGRESS_H

#include <stdint.h>

/* Called as a long phase advances (writing the weights, reading them
 * back): `done` of `total` units (bytes).  Never changes the plan. */
typedef void (*llmc_progress_fn)(void *ctx, const char *phase, uint64_t done, uint64_t total);

#endif
