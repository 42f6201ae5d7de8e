/* Pre-quantized weights (quant_weight.h). */
#include "quant_weight.h"

int llmc_quant_weight_dequantize(const llmc_graph *g, int dq, float *out)
{
    const llmc_value *wq = &g->values[llmc_quant_weight_input(g, dq, 0)];
    const llmc_value *sv = &g->values[llmc_quant_weight_input(g, dq, 1)];
    const uint8_t *q = llmc_const_bytes(&wq->konst);
    const float *scale = llmc_const_bytes(&sv->konst);
    const uint8_t *zp = llmc_const_bytes(&g->values[llmc_quant_weight_input(g, dq, 2)].konst);
    if (!q || !scale || !zp)
        return -1;
    int64_t k = wq->shape.dims[0].c, n = wq->shape.dims[1].c, groups = sv->shape.dims[0].c;
    int64_t block = llmc_node_attr_int(g, dq, "block_size", (k + groups - 1) / groups);
    bool is_signed = wq->dtype == LLMC_DT_INT8;
    for (int64_t i = 0; i < k; i++)
        for (int64_t j = 0; j < n; j++) {
            int64_t at = i / block * n + j;
            int v = is_signed ? (int8_t)q[i * n + j] : q[i * n + j];
            int z = is_signed ? (int8_t)zp[at] : zp[at];
            out[i * n + j] = (float)(v - z) * scale[at];
        }
    return 0;
}
