/* Shapes of MatMul, Gemm, the reductions, Softmax, LayerNormalization and
 * Gather. */
#include "shape_ops.h"

#include "shape_infer.h"

int infer_matmul_shape(const infer *c, llmc_shape *out)
{
    const llmc_value *a = input(c, 0), *b = input(c, 1);
    if (!b || a->shape.rank < 1 || b->shape.rank < 1)
        return infer_fail(c, LLMC_E_INPUT, "%s needs two operands of rank >= 1", c->n->op_type);
    /* numpy: a 1-D left operand gets a leading 1, a 1-D right operand a
     * trailing 1, and those dims are removed from the result. */
    llmc_shape sa = a->shape, sb = b->shape, batch_a = sa, batch_b = sb;
    if (sa.rank == 1)
        sa = make_shape(2, (llmc_affine[]){llmc_aff_const(1), a->shape.dims[0]});
    if (sb.rank == 1)
        sb = make_shape(2, (llmc_affine[]){b->shape.dims[0], llmc_aff_const(1)});
    int rc = infer_require_equal_dims(c, sa.dims[sa.rank - 1], sb.dims[sb.rank - 2], "inner dims");
    if (rc)
        return rc;
    batch_a = make_shape(sa.rank - 2, sa.dims);
    batch_b = make_shape(sb.rank - 2, sb.dims);
    if ((rc = infer_broadcast_shapes(c, &batch_a, &batch_b, out)))
        return rc;
    if (a->shape.rank > 1)
        out->dims[out->rank++] = sa.dims[sa.rank - 2];
    if (b->shape.rank > 1)
        out->dims[out->rank++] = sb.dims[sb.rank - 1];
    if (out->rank > LLMC_MAX_RANK)
        return infer_fail(c, LLMC_E_UNSUPPORTED, "rank above %d", LLMC_MAX_RANK);
    return LLMC_OK;
}

int infer_matmul(infer *c)
{
    const llmc_value *a = input(c, 0), *b = input(c, 1);
    if (b && a->dtype != b->dtype)
        return infer_fail(c, LLMC_E_INPUT, "operand types differ");
    llmc_shape out;
    int rc = infer_matmul_shape(c, &out);
    if (!rc)
        infer_set_output(c, 0, a->dtype, &out);
    return rc;
}

int infer_gemm(infer *c)
{
    const llmc_value *a = input(c, 0), *b = input(c, 1), *bias = input(c, 2);
    if (!b || a->shape.rank != 2 || b->shape.rank != 2)
        return infer_fail(c, LLMC_E_INPUT, "Gemm needs two 2-D operands");
    bool ta = llmc_node_attr_int(c->g, c->id, "transA", 0) != 0;
    bool tb = llmc_node_attr_int(c->g, c->id, "transB", 0) != 0;
    llmc_affine m = a->shape.dims[ta ? 1 : 0], ka = a->shape.dims[ta ? 0 : 1];
    llmc_affine kb = b->shape.dims[tb ? 1 : 0], n = b->shape.dims[tb ? 0 : 1];
    int rc = infer_require_equal_dims(c, ka, kb, "inner dims");
    if (rc)
        return rc;
    llmc_shape out = make_shape(2, (llmc_affine[]){m, n});
    if (bias) {
        /* C broadcasts unidirectionally to (M, N). */
        llmc_shape r;
        if (bias->shape.rank > 2 || (rc = infer_broadcast_shapes(c, &out, &bias->shape, &r)))
            return rc ? rc : infer_fail(c, LLMC_E_INPUT, "C has rank %d", bias->shape.rank);
        if (!llmc_aff_eq(r.dims[0], m) || !llmc_aff_eq(r.dims[1], n))
            return infer_fail(c, LLMC_E_INPUT, "C does not broadcast to (M, N)");
    }
    infer_set_output(c, 0, a->dtype, &out);
    return LLMC_OK;
}

/* Opset at which each Reduce* op takes axes as its input 1 rather than as an
 * attribute: 13 for ReduceSum, 18 for the others. */
static int reduce_axes_input_opset(llmc_op op)
{
    return op == LLMC_ONNX_ReduceSum ? 13 : 18;
}

/* Marks the axes a Reduce* node reduces; *identity when it reduces none. */
static int reduce_axes(const infer *c, int rank, bool *reduced, bool *identity)
{
    int64_t axes[LLMC_MAX_RANK];
    int n = 0, rc;
    const llmc_attr *a = llmc_node_attr(c->g, c->id, "axes");
    if (c->n->opset >= reduce_axes_input_opset(c->op)) {
        if (a)
            return infer_fail(c, LLMC_E_INPUT, "at opset %d axes is input 1, not an attribute", c->n->opset);
        if (input(c, 1) && (rc = infer_const_ints(c, 1, axes, LLMC_MAX_RANK, &n, "axes")))
            return rc;
    } else {
        if (input(c, 1))
            return infer_fail(c, LLMC_E_INPUT, "axes is an attribute before opset %d, not input 1",
                              reduce_axes_input_opset(c->op));
        if (a && a->n_ints > LLMC_MAX_RANK)
            return infer_fail(c, LLMC_E_INPUT, "%d axes for rank %d", a->n_ints, rank);
        for (n = 0; a && n < a->n_ints; n++)
            axes[n] = a->ints[n];
    }
    *identity = n == 0 && llmc_node_attr_int(c->g, c->id, "noop_with_empty_axes", 0) != 0;
    for (int i = 0; i < rank; i++)
        reduced[i] = n == 0 && !*identity;
    for (int i = 0; i < n; i++) {
        int axis;
        if ((rc = infer_normalize_axis(c, axes[i], rank, &axis)))
            return rc;
        if (reduced[axis])
            return infer_fail(c, LLMC_E_INPUT, "axis %d repeated", axis);
        reduced[axis] = true;
    }
    return LLMC_OK;
}

int infer_reduce(infer *c)
{
    const llmc_value *x = input(c, 0);
    bool reduced[LLMC_MAX_RANK], identity;
    int rc = reduce_axes(c, x->shape.rank, reduced, &identity);
    if (rc)
        return rc;
    bool keep = llmc_node_attr_int(c->g, c->id, "keepdims", 1) != 0;
    llmc_shape out = {.rank = 0};
    for (int i = 0; i < x->shape.rank; i++) {
        if (!reduced[i])
            out.dims[out.rank++] = x->shape.dims[i];
        else if (keep)
            out.dims[out.rank++] = llmc_aff_const(1);
    }
    infer_set_output(c, 0, x->dtype, &out);
    return LLMC_OK;
}

int infer_softmax(infer *c)
{
    const llmc_value *x = input(c, 0);
    int axis;
    int rc = infer_normalize_axis(c, llmc_node_attr_int(c->g, c->id, "axis", -1), x->shape.rank, &axis);
    if (rc)
        return rc;
    infer_set_output(c, 0, x->dtype, &x->shape);
    return LLMC_OK;
}

int infer_layer_norm(infer *c)
{
    const llmc_value *x = input(c, 0);
    int axis;
    if (!input(c, 1))
        return infer_fail(c, LLMC_E_INPUT, "Scale is missing");
    int rc = infer_normalize_axis(c, llmc_node_attr_int(c->g, c->id, "axis", -1), x->shape.rank, &axis);
    if (rc)
        return rc;
    infer_set_output(c, 0, x->dtype, &x->shape);
    /* Mean and InvStdDev keep the leading dims, 1 over the normalized axes,
     * in the stash type. */
    llmc_shape stats = x->shape;
    for (int i = axis; i < stats.rank; i++)
        stats.dims[i] = llmc_aff_const(1);
    int stash = (int)llmc_node_attr_int(c->g, c->id, "stash_type", LLMC_DT_FLOAT);
    infer_set_output(c, 1, stash, &stats);
    infer_set_output(c, 2, stash, &stats);
    return LLMC_OK;
}

int infer_gather(infer *c)
{
    const llmc_value *data = input(c, 0), *idx = input(c, 1);
    int axis;
    if (!idx || (idx->dtype != LLMC_DT_INT64 && idx->dtype != LLMC_DT_INT32))
        return infer_fail(c, LLMC_E_INPUT, "indices must be int32 or int64");
    int rc = infer_normalize_axis(c, llmc_node_attr_int(c->g, c->id, "axis", 0), data->shape.rank, &axis);
    if (rc)
        return rc;
    llmc_shape out = {.rank = data->shape.rank - 1 + idx->shape.rank};
    if (out.rank > LLMC_MAX_RANK)
        return infer_fail(c, LLMC_E_UNSUPPORTED, "rank above %d", LLMC_MAX_RANK);
    int r = 0;
    for (int i = 0; i < axis; i++)
        out.dims[r++] = data->shape.dims[i];
    for (int i = 0; i < idx->shape.rank; i++)
        out.dims[r++] = idx->shape.dims[i];
    for (int i = axis + 1; i < data->shape.rank; i++)
        out.dims[r++] = data->shape.dims[i];
    infer_set_output(c, 0, data->dtype, &out);

    llmc_affine iv[LLMC_MAX_SYM_ELEMS], dv[LLMC_MAX_SYM_ELEMS], ov[LLMC_MAX_SYM_ELEMS];
    int ni = llmc_value_ints(c->g, input_id(c, 1), iv, LLMC_MAX_SYM_ELEMS);
    llmc_affine dim = data->shape.dims[axis];
    for (int i = 0; i < ni && llmc_aff_is_const(dim); i++) {
        if (!llmc_aff_is_const(iv[i]))
            return LLMC_OK;
        if (iv[i].c < -dim.c || iv[i].c >= dim.c)
            return infer_fail(c, LLMC_E_INPUT, "index %lld out of range for dim %lld", (long long)iv[i].c,
                              (long long)dim.c);
        iv[i].c += iv[i].c < 0 ? dim.c : 0;
    }
    int64_t numel, inner;
    llmc_poly pinner;
    if (ni < 0 || !llmc_aff_is_const(dim) || llmc_value_ints(c->g, input_id(c, 0), dv, LLMC_MAX_SYM_ELEMS) < 0 ||
        !llmc_shape_numel_const(&out, &numel) || numel > LLMC_MAX_SYM_ELEMS ||
        !llmc_shape_product(&data->shape, axis + 1, data->shape.rank, &pinner))
        return LLMC_OK;
    inner = pinner.c[0][0];
    /* out flat = (outer * ni + j) * inner + i  <-  data (outer * dim + idx[j]) * inner + i */
    for (int64_t f = 0; f < numel; f++) {
        int64_t i = f % inner, j = (f / inner) % ni, outer = f / inner / ni;
        ov[f] = dv[(outer * dim.c + iv[j].c) * inner + i];
    }
    infer_set_output_sym(c, 0, ov, (int)numel);
    return LLMC_OK;
}
