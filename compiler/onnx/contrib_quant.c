/* ONNX Runtime's block-quantized weights (ContribOperators.md), written by
 * its MatMulNBits quantizer (transformers.js model_q4.onnx / q4f16) and by
 * onnxruntime-genai's int4 builder:
 *
 *   MatMulNBits(A, B, scales, zero_points?, g_idx?, bias?) -> Y
 *       attributes K, N, bits (4), block_size (a power of 2 >= 16),
 *       accuracy_level (how ONNX Runtime may compute; read and ignored:
 *       llmc runs every quantized Linear on int8 activations);
 *       B uint8 [N, ceil(K / block_size), block_size / 2]: column n's 4-bit
 *       values along K, low nibble first; scales [N * blocks] (float32 or
 *       float16), zero_points uint8 [N * ceil(blocks / 2)] packed the same
 *       way, 8 when absent; W[k, n] = (q - zp) * scale of (n, k / block_size)
 *   GatherBlockQuantized(data, indices, scales, zero_points?) -> Y
 *       attributes gather_axis (0), quantize_axis (1), block_size (128),
 *       bits (4); data uint8 [V, H * bits / 8], blocks of block_size along
 *       H, zero points packed like data (default 8, or 128 for 8 bits)
 *
 * expand into the canonical form of a pre-quantized weight
 * (passes/quant_canonical.c): MatMul(A, DequantizeLinear(Wq [K, N] uint8,
 * scale [blocks, N], zp [blocks, N], axis 0, block_size)) (+ Add(bias)),
 * the nibbles unpacked one per byte; and Gather(DequantizeLinear(table),
 * indices).  Nothing is re-quantized: the q values, scales and zero points
 * are the file's. */
#include <stdlib.h>
#include <string.h>

#include "contrib_expand.h"

#define NIBBLE_ZERO_POINT 8
#define BYTE_ZERO_POINT 128

/* The value of input i as a constant of `dtype` with `count` elements,
 * else an error naming the input. */
static int const_input(llmc_expand *e, int i, int dtype, int64_t count, const void **bytes)
{
    int v = ex_input(e, i);
    const llmc_value *x = &e->g->values[v];
    if (!x->is_const || x->is_graph_input)
        return ex_fail_input(e, LLMC_E_UNSUPPORTED, i, "is not a constant (an initializer)");
    if (x->dtype != dtype)
        return ex_fail_input(e, LLMC_E_INPUT, i, "is %s, not %s", llmc_dtype_name(x->dtype), llmc_dtype_name(dtype));
    if (x->konst.nbytes != (uint64_t)count * llmc_dtype_size(dtype))
        return ex_fail_input(e, LLMC_E_INPUT, i, "has %llu elements, not the %lld the attributes give",
                             (unsigned long long)(x->konst.nbytes / llmc_dtype_size(dtype)), (long long)count);
    *bytes = llmc_const_bytes(&x->konst);
    return *bytes || !count ? LLMC_OK : ex_fail(e, LLMC_E_NOMEM, "out of memory");
}

static bool power_of_two(int64_t v)
{
    return v > 0 && (v & (v - 1)) == 0;
}

/* Element j of a row of `bits`-wide values packed low bits first. */
static uint8_t packed_at(const uint8_t *row, int64_t j, int bits)
{
    return bits == 8 ? row[j] : (uint8_t)(row[j / 2] >> (4 * (j % 2)) & 0x0f);
}

/* A file's grid of blocks: `rows` rows (output features, or table rows)
 * of `blocks` blocks each, values `bits` wide. */
typedef struct {
    int64_t rows, blocks;   /* the file's: one row of blocks per output row */
    int bits;
} block_grid;

/* The zero point of (row n, block g), packed `bits` wide a row at a time
 * (`dflt` for every one when zps is NULL), into out[g * rows + n]
 * (transposed) or out[n * blocks + g]. */
static void unpack_zero_points(const block_grid *b, const uint8_t *zps, uint8_t dflt, bool transposed, uint8_t *out)
{
    int64_t row_bytes = (b->blocks * b->bits + 7) / 8;
    for (int64_t n = 0; n < b->rows; n++)
        for (int64_t g = 0; g < b->blocks; g++)
            out[transposed ? g * b->rows + n : n * b->blocks + g] = zps ? packed_at(zps + n * row_bytes, g, b->bits)
                                                                        : dflt;
}

/* DequantizeLinear(wq, scale, zp) with the given axis and block size. */
static int dequantize(llmc_expand *e, const int *ins, int64_t axis, int64_t block)
{
    int out, node = ex_node(e, "DequantizeLinear", ins, 3, LLMC_DT_FLOAT, &out, 1);
    if (node < 0 || ex_set_int(e, node, "axis", axis) || ex_set_int(e, node, "block_size", block))
        return -1;
    return out;
}

/* The three constants of the canonical weight [K, N] from B [N, blocks,
 * block / 2], scales [N * blocks], zero points; ins gets their ids. */
static int matmul_nbits_weight(llmc_expand *e, int64_t k, int64_t n, int64_t block, int *ins)
{
    int64_t blocks = (k + block - 1) / block, row_bytes = blocks * block / 2;
    const void *b, *scales, *zps = NULL;
    int rc = const_input(e, 1, LLMC_DT_UINT8, n * row_bytes, &b);
    if (!rc)
        rc = const_input(e, 2, LLMC_DT_FLOAT, n * blocks, &scales);
    if (!rc && ex_input(e, 3) >= 0)
        rc = e->g->values[ex_input(e, 3)].dtype != LLMC_DT_UINT8
                 ? ex_fail_input(e, LLMC_E_UNSUPPORTED, 3, "float zero points are not read (uint8 packed ones are)")
                 : const_input(e, 3, LLMC_DT_UINT8, n * ((blocks + 1) / 2), &zps);
    if (rc)
        return rc;
    uint8_t *wq = malloc((size_t)(k * n)), *zp = malloc((size_t)(blocks * n));
    float *scale = malloc(sizeof *scale * (size_t)(blocks * n));
    if (wq && zp && scale) {
        for (int64_t c = 0; c < n; c++)
            for (int64_t r = 0; r < k; r++)
                wq[r * n + c] = packed_at((const uint8_t *)b + c * row_bytes, r, 4);
        for (int64_t c = 0; c < n; c++)
            for (int64_t g = 0; g < blocks; g++)
                scale[g * n + c] = ((const float *)scales)[c * blocks + g];
        block_grid grid = {n, blocks, 4};
        unpack_zero_points(&grid, zps, NIBBLE_ZERO_POINT, true, zp);
        llmc_shape ws = {.rank = 2, .dims = {llmc_aff_const(k), llmc_aff_const(n)}};
        llmc_shape ss = {.rank = 2, .dims = {llmc_aff_const(blocks), llmc_aff_const(n)}};
        ins[0] = ex_const(e, LLMC_DT_UINT8, &ws, wq, (uint64_t)(k * n));
        ins[1] = ins[0] < 0 ? -1 : ex_const(e, LLMC_DT_FLOAT, &ss, scale, sizeof *scale * (uint64_t)(blocks * n));
        ins[2] = ins[1] < 0 ? -1 : ex_const(e, LLMC_DT_UINT8, &ss, zp, (uint64_t)(blocks * n));
    }
    bool ok = wq && zp && scale;
    free(wq);
    free(zp);
    free(scale);
    if (!ok)
        return ex_fail(e, LLMC_E_NOMEM, "out of memory");
    return ins[2] < 0 ? e->err->code : LLMC_OK;
}

int expand_matmul_nbits(llmc_expand *e)
{
    int64_t k = llmc_node_attr_int(e->g, e->node, "K", -1), n = llmc_node_attr_int(e->g, e->node, "N", -1);
    int64_t bits = llmc_node_attr_int(e->g, e->node, "bits", 4);
    int64_t block = llmc_node_attr_int(e->g, e->node, "block_size", -1);
    if (k <= 0 || n <= 0)
        return ex_fail(e, LLMC_E_INPUT, "attributes K and N must be positive (K %lld, N %lld)", (long long)k,
                       (long long)n);
    if (bits != 4)
        return ex_fail(e, LLMC_E_UNSUPPORTED, "bits %lld: llmc reads 4-bit MatMulNBits", (long long)bits);
    if (!power_of_two(block) || block < 16)
        return ex_fail(e, LLMC_E_INPUT, "block_size %lld is not a power of 2 >= 16", (long long)block);
    const llmc_shape *bs = &e->g->values[ex_input(e, 1)].shape;
    if (bs->rank != 3 || bs->dims[0].c != n || bs->dims[1].c != (k + block - 1) / block || bs->dims[2].c != block / 2)
        return ex_fail_input(e, LLMC_E_INPUT, 1, "must be uint8 [N, ceil(K / block_size), block_size / 2] = "
                             "[%lld, %lld, %lld] for K %lld, N %lld", (long long)n,
                             (long long)((k + block - 1) / block), (long long)(block / 2), (long long)k, (long long)n);
    if (ex_input(e, 4) >= 0)
        return ex_fail_input(e, LLMC_E_UNSUPPORTED, 4, "g_idx (act-order) is not supported");
    const llmc_shape *as = &e->g->values[ex_input(e, 0)].shape;
    if (as->rank >= 1 && llmc_aff_is_const(as->dims[as->rank - 1]) && as->dims[as->rank - 1].c != k)
        return ex_fail_input(e, LLMC_E_INPUT, 0, "has last dim %lld, not K = %lld", (long long)as->dims[as->rank - 1].c,
                             (long long)k);
    int ins[3];
    int rc = matmul_nbits_weight(e, k, n, block, ins);
    int w = rc ? -1 : dequantize(e, ins, 0, block);
    if (w < 0)
        return rc ? rc : e->err->code;
    int mm_in[2] = {ex_input(e, 0), w}, bias = ex_input(e, 5), y = ex_output(e, 0);
    if (bias < 0)
        return ex_node_into(e, "MatMul", mm_in, 2, y) < 0 ? e->err->code : LLMC_OK;
    int product = ex_node1(e, "MatMul", mm_in, 2, LLMC_DT_FLOAT);
    int add_in[2] = {product, bias};
    return product < 0 || ex_node_into(e, "Add", add_in, 2, y) < 0 ? e->err->code : LLMC_OK;
}

int expand_gather_block_quantized(llmc_expand *e)
{
    int64_t bits = llmc_node_attr_int(e->g, e->node, "bits", 4);
    int64_t block = llmc_node_attr_int(e->g, e->node, "block_size", 128);
    const llmc_value *data = &e->g->values[ex_input(e, 0)];
    if (llmc_node_attr_int(e->g, e->node, "gather_axis", 0) != 0 || data->shape.rank != 2 ||
        (llmc_node_attr_int(e->g, e->node, "quantize_axis", 1) != 1 &&
         llmc_node_attr_int(e->g, e->node, "quantize_axis", 1) != -1))
        return ex_fail(e, LLMC_E_UNSUPPORTED, "llmc reads a table [V, H] gathered on axis 0, quantized along H");
    if (bits != 4 && bits != 8)
        return ex_fail(e, LLMC_E_UNSUPPORTED, "bits %lld: llmc reads 4 and 8", (long long)bits);
    if (!power_of_two(block) || block < 16)
        return ex_fail(e, LLMC_E_INPUT, "block_size %lld is not a power of 2 >= 16", (long long)block);
    int64_t v = data->shape.dims[0].c, h = data->shape.dims[1].c * 8 / bits, blocks = (h + block - 1) / block;
    const void *q, *scales, *zps = NULL;
    int rc = const_input(e, 0, LLMC_DT_UINT8, v * h * bits / 8, &q);
    if (!rc)
        rc = const_input(e, 2, LLMC_DT_FLOAT, v * blocks, &scales);
    if (!rc && ex_input(e, 3) >= 0)
        rc = const_input(e, 3, LLMC_DT_UINT8, v * ((blocks * bits + 7) / 8), &zps);
    if (rc)
        return rc;
    uint8_t *wq = malloc((size_t)(v * h)), *zp = malloc((size_t)(v * blocks));
    int ins[3] = {-1, -1, -1};
    if (wq && zp) {
        for (int64_t r = 0; r < v; r++)
            for (int64_t c = 0; c < h; c++)
                wq[r * h + c] = packed_at((const uint8_t *)q + r * (h * bits / 8), c, (int)bits);
        block_grid grid = {v, blocks, (int)bits};
        unpack_zero_points(&grid, zps, bits == 4 ? NIBBLE_ZERO_POINT : BYTE_ZERO_POINT, false, zp);
        llmc_shape ts = {.rank = 2, .dims = {llmc_aff_const(v), llmc_aff_const(h)}};
        llmc_shape ss = {.rank = 2, .dims = {llmc_aff_const(v), llmc_aff_const(blocks)}};
        ins[0] = ex_const(e, LLMC_DT_UINT8, &ts, wq, (uint64_t)(v * h));
        ins[1] = ins[0] < 0 ? -1 : ex_const(e, LLMC_DT_FLOAT, &ss, scales, sizeof(float) * (uint64_t)(v * blocks));
        ins[2] = ins[1] < 0 ? -1 : ex_const(e, LLMC_DT_UINT8, &ss, zp, (uint64_t)(v * blocks));
    }
    bool ok = wq && zp;
    free(wq);
    free(zp);
    if (!ok)
        return ex_fail(e, LLMC_E_NOMEM, "out of memory");
    int table = ins[2] < 0 ? -1 : dequantize(e, ins, 1, block);
    int gather_in[2] = {table, ex_input(e, 1)};
    return table < 0 || ex_node_into(e, "Gather", gather_in, 2, ex_output(e, 0)) < 0 ? e->err->code : LLMC_OK;
}
