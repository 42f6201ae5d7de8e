/* Shapes of the quantization ops: DequantizeLinear, QuantizeLinear,
 * DynamicQuantizeLinear and MatMulInteger.
 *
 * DequantizeLinear and QuantizeLinear take the scale layouts of every
 * opset up to 21, whatever opset the model imports (a file written for an
 * older opset never has a block_size, so its meaning is the same):
 *   per tensor   scale a scalar (or [1]), zero point likewise;
 *   per axis     scale [C], C = x's dim at `axis` (default 1);
 *   blocked      block_size B > 0: scale of x's rank, x's dims except
 *                ceil(dim / B) at `axis` (opset 21);
 * the zero point, when present, has the scale's shape. */
#include "shape_ops.h"

#include "shape_infer.h"

static bool is_8bit(int dtype)
{
    return dtype == LLMC_DT_UINT8 || dtype == LLMC_DT_INT8;
}

/* A scalar or a one-element vector. */
static bool is_scalar(const llmc_shape *s)
{
    return s->rank == 0 || (s->rank == 1 && llmc_aff_eq(s->dims[0], llmc_aff_const(1)));
}

static int check_blocked(const infer *c, const llmc_shape *x, const llmc_shape *s, int axis, int64_t block)
{
    if (s->rank != x->rank)
        return infer_fail(c, LLMC_E_INPUT, "block_size %lld: the scale has rank %d, x rank %d", (long long)block,
                          s->rank, x->rank);
    for (int i = 0; i < x->rank; i++) {
        llmc_affine want = x->dims[i];
        if (i == axis) {
            if (!llmc_aff_is_const(x->dims[i]))
                return infer_fail(c, LLMC_E_UNSUPPORTED, "blocked axis %d has a symbolic dim", axis);
            want = llmc_aff_const((x->dims[i].c + block - 1) / block);
        }
        if (!llmc_aff_eq(s->dims[i], want))
            return infer_fail(c, LLMC_E_INPUT, "block_size %lld: scale dim %d is not %s", (long long)block, i,
                              i == axis ? "ceil(x dim / block_size)" : "x's dim");
    }
    return LLMC_OK;
}

/* The scale (input 1) and zero point (input 2) fit x (input `xk`) under
 * the node's axis and block_size. */
static int check_scale_layout(const infer *c, const llmc_shape *x)
{
    const llmc_value *scale = input(c, 1), *zp = input(c, 2);
    int64_t block = llmc_node_attr_int(c->g, c->id, "block_size", 0);
    int axis = 0, rc = LLMC_OK;
    if (scale->dtype != LLMC_DT_FLOAT)
        return infer_fail(c, LLMC_E_UNSUPPORTED, "scale of type %s (float32 and float16 are read)",
                          llmc_dtype_name(scale->dtype));
    if (block < 0)
        return infer_fail(c, LLMC_E_INPUT, "block_size %lld is negative", (long long)block);
    if (block > 0 || !is_scalar(&scale->shape))
        rc = infer_normalize_axis(c, llmc_node_attr_int(c->g, c->id, "axis", 1), x->rank, &axis);
    if (rc)
        return rc;
    if (block > 0)
        rc = check_blocked(c, x, &scale->shape, axis, block);
    else if (!is_scalar(&scale->shape) &&
             (scale->shape.rank != 1 || !llmc_aff_eq(scale->shape.dims[0], x->dims[axis])))
        return infer_fail(c, LLMC_E_INPUT, "the scale is neither a scalar nor [C] with C x's dim at axis %d",
                          axis);
    if (!rc && zp && !llmc_shape_eq(&zp->shape, &scale->shape))
        return infer_fail(c, LLMC_E_INPUT, "the zero point's shape is not the scale's");
    return rc;
}

int infer_dequantize_linear(infer *c)
{
    const llmc_value *x = input(c, 0), *zp = input(c, 2);
    if (!is_8bit(x->dtype) && x->dtype != LLMC_DT_INT32)
        return infer_fail(c, LLMC_E_UNSUPPORTED, "x of type %s (uint8, int8 and int32 are read)",
                          llmc_dtype_name(x->dtype));
    if (zp && zp->dtype != x->dtype)
        return infer_fail(c, LLMC_E_INPUT, "the zero point is %s, x %s", llmc_dtype_name(zp->dtype),
                          llmc_dtype_name(x->dtype));
    int rc = check_scale_layout(c, &x->shape);
    if (!rc)
        infer_set_output(c, 0, LLMC_DT_FLOAT, &x->shape);
    return rc;
}

int infer_quantize_linear(infer *c)
{
    const llmc_value *x = input(c, 0), *zp = input(c, 2);
    int to = zp ? zp->dtype : LLMC_DT_UINT8;
    if (x->dtype != LLMC_DT_FLOAT || !is_8bit(to))
        return infer_fail(c, LLMC_E_UNSUPPORTED, "float x to uint8 or int8 is computed, not %s to %s",
                          llmc_dtype_name(x->dtype), llmc_dtype_name(to));
    int rc = check_scale_layout(c, &x->shape);
    if (!rc)
        infer_set_output(c, 0, to, &x->shape);
    return rc;
}

int infer_dynamic_quantize_linear(infer *c)
{
    const llmc_value *x = input(c, 0);
    if (x->dtype != LLMC_DT_FLOAT)
        return infer_fail(c, LLMC_E_INPUT, "x is %s, not float", llmc_dtype_name(x->dtype));
    llmc_shape scalar = scalar_shape();
    infer_set_output(c, 0, LLMC_DT_UINT8, &x->shape);
    infer_set_output(c, 1, LLMC_DT_FLOAT, &scalar);
    infer_set_output(c, 2, LLMC_DT_UINT8, &scalar);
    return LLMC_OK;
}

int infer_matmul_integer(infer *c)
{
    const llmc_value *a = input(c, 0), *b = input(c, 1), *azp = input(c, 2), *bzp = input(c, 3);
    if (!is_8bit(a->dtype) || !is_8bit(b->dtype) || (azp && azp->dtype != a->dtype) ||
        (bzp && bzp->dtype != b->dtype))
        return infer_fail(c, LLMC_E_INPUT, "A, B and their zero points must be uint8 or int8, each zero "
                          "point of its operand's type");
    if ((azp && azp->shape.rank > 1) || (bzp && bzp->shape.rank > 1))
        return infer_fail(c, LLMC_E_UNSUPPORTED, "zero points of rank above 1");
    llmc_shape out;
    int rc = infer_matmul_shape(c, &out);
    if (rc)
        return rc;
    infer_set_output(c, 0, LLMC_DT_INT32, &out);
    return LLMC_OK;
}
