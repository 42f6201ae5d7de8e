/* Results of an evaluator (evaluator.h). */
#include "evaluator.h"

#include <stdlib.h>
#include <string.h>

void llmc_eval_tensor_free(llmc_eval_tensor *t)
{
    free(t->data);
    memset(t, 0, sizeof *t);
}
