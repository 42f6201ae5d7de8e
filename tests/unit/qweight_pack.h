/* Test helper: a float32 W [n, k] packed into QWeightTiles bytes by the
 * compiler's own packer (compiler/codegen/weight_pack.h), row tile by row tile. */
#ifndef LLMC_TEST_QWEIGHT_PACK_H
#define LLMC_TEST_QWEIGHT_PACK_H

#include <stdlib.h>

#include "codegen/weight_pack.h"

/* malloc'ed; one byte more than the format needs, so an empty W packs too. */
static inline uint8_t *pack_weights(const float *W, const rt_qweight_shape *s)
{
    uint8_t *w = malloc(rt_qweight_bytes(s) + 1);
    for (int64_t ht = 0; w && ht < s->np / s->hp; ht++) {
        int64_t rows = s->n - ht * s->hp < s->hp ? s->n - ht * s->hp : s->hp;
        cg_qpack_row_tile(W + ht * s->hp * s->k, s->k, rows, s,
                          w + rt_qweight_block_offset(s, ht, 0));
    }
    return w;
}

#endif
