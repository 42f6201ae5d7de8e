/* Shapes of Transpose, Slice, Concat, Split and Expand; constant windows
 * of small integer tensors carry their contents along. */
#include "shape_ops.h"

#include "shape_infer.h"

int infer_transpose(infer *c)
{
    const llmc_value *x = input(c, 0);
    const llmc_attr *perm = llmc_node_attr(c->g, c->id, "perm");
    int rank = x->shape.rank;
    bool seen[LLMC_MAX_RANK] = {false};
    llmc_shape out = {.rank = rank};
    if (perm && perm->n_ints != rank)
        return infer_fail(c, LLMC_E_INPUT, "perm has %d entries for rank %d", perm->n_ints, rank);
    for (int i = 0; i < rank; i++) {
        int64_t p = perm ? perm->ints[i] : rank - 1 - i;   /* default: reversed */
        if (p < 0 || p >= rank || seen[p])
            return infer_fail(c, LLMC_E_INPUT, "perm is not a permutation of 0..%d", rank - 1);
        seen[p] = true;
        out.dims[i] = x->shape.dims[p];
    }
    infer_set_output(c, 0, x->dtype, &out);
    return LLMC_OK;
}

/* Copies the elements of a strided window: out[idx] = in[first + idx*step]
 * per axis (constant shapes). */
static void strided_sym(const llmc_shape *in, const llmc_affine *in_sym, const int64_t *first,
                        const int64_t *step, const llmc_shape *out, int64_t n_out, llmc_affine *out_sym)
{
    for (int64_t f = 0; f < n_out; f++) {
        int64_t rest = f, src = 0, stride = 1;
        for (int a = out->rank - 1; a >= 0; a--) {
            int64_t idx = rest % out->dims[a].c;
            rest /= out->dims[a].c;
            src += (first[a] + idx * step[a]) * stride;
            stride *= in->dims[a].c;
        }
        out_sym[f] = in_sym[src];
    }
}

/* One start or end of Slice when the dim or the index is symbolic.  A
 * negative index counts from the end; clamping is applied where it is
 * provable (sentinels such as INT64_MAX beyond any possible dim), otherwise
 * the index is taken to be within bounds, as exporters emit it. */
static int slice_index_symbolic(const infer *c, llmc_affine dim, llmc_affine x, bool is_end,
                                int64_t step, llmc_affine *r)
{
    int64_t hi;
    int64_t beyond = llmc_aff_max(dim, c->max_context, &hi) ? hi : INT32_MAX;
    llmc_affine low = llmc_aff_const(step < 0 && is_end ? -1 : 0), top = dim;
    char b[96];
    if (step < 0)
        top.c -= 1;
    if (llmc_aff_is_const(x) && x.c >= beyond) {
        *r = top;
    } else if (llmc_aff_is_const(x) && x.c < -beyond) {
        *r = low;
    } else {
        bool nonnegative = llmc_aff_provably_ge(x, llmc_aff_const(0), c->max_context);
        bool negative = llmc_aff_provably_gt(llmc_aff_const(0), x, c->max_context);
        if (!nonnegative && !(negative && llmc_aff_add(x, dim, r)))
            return infer_fail(c, LLMC_E_UNSUPPORTED, "sign of slice index %s is not known", aff_str(x, b));
        if (nonnegative)
            *r = x;
    }
    return LLMC_OK;
}

/* Element count ceil(diff / k) of a symbolic slice, k > 0. */
static int slice_length(const infer *c, llmc_affine diff, int64_t k, llmc_affine *len)
{
    char b[96];
    if (llmc_aff_is_const(diff)) {
        *len = llmc_aff_const(diff.c > 0 ? 1 + (diff.c - 1) / k : 0);
        return LLMC_OK;
    }
    if (llmc_aff_provably_ge(llmc_aff_const(0), diff, c->max_context)) {
        *len = llmc_aff_const(0);
        return LLMC_OK;
    }
    if (diff.s % k || diff.p % k)
        return infer_fail(c, LLMC_E_UNSUPPORTED, "slice length %s / %lld is not affine", aff_str(diff, b),
                          (long long)k);
    /* ceil of c/k for the constant part; the rest divides exactly. */
    int64_t cq = diff.c / k + (diff.c % k > 0);
    *len = (llmc_affine){cq, diff.s / k, diff.p / k};
    return LLMC_OK;
}

static int slice_axis(const infer *c, llmc_affine dim, llmc_affine s, llmc_affine e, int64_t k,
                      llmc_affine *first, llmc_affine *len)
{
    if (llmc_aff_is_const(dim) && llmc_aff_is_const(s) && llmc_aff_is_const(e)) {
        int64_t f, l;
        llmc_slice_axis_const(dim.c, s.c, e.c, k, &f, &l);
        *first = llmc_aff_const(f);
        *len = llmc_aff_const(l);
        return LLMC_OK;
    }
    llmc_affine diff;
    int rc = slice_index_symbolic(c, dim, s, false, k, first);
    if (!rc)
        rc = slice_index_symbolic(c, dim, e, true, k, &e);
    if (rc)
        return rc;
    if (!(k > 0 ? llmc_aff_sub(e, *first, &diff) : llmc_aff_sub(*first, e, &diff)))
        return infer_fail(c, LLMC_E_UNSUPPORTED, "slice bounds overflow");
    return slice_length(c, diff, k > 0 ? k : -k, len);
}

typedef struct {
    int n;
    llmc_affine starts[LLMC_MAX_SYM_ELEMS], ends[LLMC_MAX_SYM_ELEMS];
    int64_t axes[LLMC_MAX_SYM_ELEMS], steps[LLMC_MAX_SYM_ELEMS];
} slice_args;

static int read_slice_args(const infer *c, int rank, slice_args *a)
{
    int ne, na = 0, ns = 0, rc;
    if ((rc = infer_known_ints(c, 1, a->starts, &a->n, "starts")) ||
        (rc = infer_known_ints(c, 2, a->ends, &ne, "ends")))
        return rc;
    if (input(c, 3) && (rc = infer_const_ints(c, 3, a->axes, LLMC_MAX_SYM_ELEMS, &na, "axes")))
        return rc;
    if (input(c, 4) && (rc = infer_const_ints(c, 4, a->steps, LLMC_MAX_SYM_ELEMS, &ns, "steps")))
        return rc;
    if (ne != a->n || (input(c, 3) && na != a->n) || (input(c, 4) && ns != a->n))
        return infer_fail(c, LLMC_E_INPUT, "starts, ends, axes and steps differ in length");
    for (int i = 0; i < a->n; i++) {
        int axis = i;
        if (input(c, 3) && (rc = infer_normalize_axis(c, a->axes[i], rank, &axis)))
            return rc;
        a->axes[i] = axis;
        if (!input(c, 4))
            a->steps[i] = 1;
        if (a->steps[i] == 0 || a->steps[i] == INT64_MIN)
            return infer_fail(c, LLMC_E_INPUT, "slice step %lld", (long long)a->steps[i]);
    }
    return LLMC_OK;
}

int infer_slice(infer *c)
{
    const llmc_value *x = input(c, 0);
    slice_args a;
    int rc = read_slice_args(c, x->shape.rank, &a);
    if (rc)
        return rc;
    llmc_shape out = x->shape;
    llmc_affine first[LLMC_MAX_RANK];
    int64_t step[LLMC_MAX_RANK];
    bool seen[LLMC_MAX_RANK] = {false};
    for (int i = 0; i < out.rank; i++) {
        first[i] = llmc_aff_const(0);
        step[i] = 1;
    }
    for (int i = 0; i < a.n; i++) {
        int axis = (int)a.axes[i];
        if (seen[axis])
            return infer_fail(c, LLMC_E_INPUT, "axis %d repeated", axis);
        seen[axis] = true;
        step[axis] = a.steps[i];
        rc = slice_axis(c, x->shape.dims[axis], a.starts[i], a.ends[i], a.steps[i], &first[axis],
                        &out.dims[axis]);
        if (rc)
            return rc;
    }
    infer_set_output(c, 0, x->dtype, &out);

    llmc_affine in_sym[LLMC_MAX_SYM_ELEMS], out_sym[LLMC_MAX_SYM_ELEMS];
    int64_t numel, first_c[LLMC_MAX_RANK], in_numel;
    for (int i = 0; i < out.rank; i++) {
        if (!llmc_aff_is_const(first[i]))
            return LLMC_OK;
        first_c[i] = first[i].c;
    }
    if (!llmc_shape_numel_const(&out, &numel) || numel == 0 || numel > LLMC_MAX_SYM_ELEMS ||
        !llmc_shape_numel_const(&x->shape, &in_numel) ||
        llmc_value_ints(c->g, input_id(c, 0), in_sym, LLMC_MAX_SYM_ELEMS) < 0)
        return LLMC_OK;
    strided_sym(&x->shape, in_sym, first_c, step, &out, numel, out_sym);
    infer_set_output_sym(c, 0, out_sym, (int)numel);
    return LLMC_OK;
}

/* Contents of a Concat: each input's elements land at its offset along
 * `axis` of the (constant) output shape. */
static void concat_sym(const infer *c, int axis, const llmc_shape *out)
{
    llmc_affine vals[LLMC_MAX_SYM_ELEMS], out_sym[LLMC_MAX_SYM_ELEMS];
    int64_t numel, offset = 0, inner = 1;
    if (!llmc_shape_numel_const(out, &numel) || numel == 0 || numel > LLMC_MAX_SYM_ELEMS)
        return;
    for (int i = axis + 1; i < out->rank; i++)
        inner *= out->dims[i].c;
    for (int k = 0; k < c->n->n_inputs; k++) {
        const llmc_value *v = input(c, k);
        int n = llmc_value_ints(c->g, input_id(c, k), vals, LLMC_MAX_SYM_ELEMS);
        if (n < 0)
            return;
        int64_t len = v->shape.dims[axis].c;
        /* element (outer, j, i) of input k -> (outer, offset + j, i) */
        for (int f = 0; f < n; f++) {
            int64_t i = f % inner, j = (f / inner) % len, outer = f / inner / len;
            out_sym[(outer * out->dims[axis].c + offset + j) * inner + i] = vals[f];
        }
        offset += len;
    }
    infer_set_output_sym(c, 0, out_sym, (int)numel);
}

int infer_concat(infer *c)
{
    const llmc_value *first = input(c, 0);
    const llmc_attr *axis_attr = llmc_node_attr(c->g, c->id, "axis");
    int axis, rc;
    if (!axis_attr)
        return infer_fail(c, LLMC_E_INPUT, "Concat needs an axis");
    if ((rc = infer_normalize_axis(c, axis_attr->i, first->shape.rank, &axis)))
        return rc;
    llmc_shape out = first->shape;
    for (int k = 1; k < c->n->n_inputs; k++) {
        const llmc_value *v = input(c, k);
        if (!v || v->shape.rank != out.rank || v->dtype != first->dtype)
            return infer_fail(c, LLMC_E_INPUT, "input %d differs in rank or type", k);
        for (int i = 0; i < out.rank; i++)
            if (i != axis &&
                (rc = infer_require_equal_dims(c, out.dims[i], v->shape.dims[i], "non-axis dims")))
                return rc;
        if (!llmc_aff_add(out.dims[axis], v->shape.dims[axis], &out.dims[axis]))
            return infer_fail(c, LLMC_E_UNSUPPORTED, "dim overflow");
    }
    infer_set_output(c, 0, first->dtype, &out);
    concat_sym(c, axis, &out);
    return LLMC_OK;
}

/* Contents of Split output k: the window [offset, offset+len) on `axis`. */
static void split_sym(const infer *c, int k, int axis, int64_t offset)
{
    const llmc_value *x = input(c, 0);
    llmc_value *o = output(c, k);
    llmc_affine in_sym[LLMC_MAX_SYM_ELEMS], out_sym[LLMC_MAX_SYM_ELEMS];
    int64_t first[LLMC_MAX_RANK] = {0}, step[LLMC_MAX_RANK], numel, in_numel;
    if (!o || !llmc_shape_numel_const(&x->shape, &in_numel) || !llmc_shape_numel_const(&o->shape, &numel) ||
        numel == 0 || llmc_value_ints(c->g, input_id(c, 0), in_sym, LLMC_MAX_SYM_ELEMS) < 0)
        return;
    for (int i = 0; i < x->shape.rank; i++)
        step[i] = 1;
    first[axis] = offset;
    strided_sym(&x->shape, in_sym, first, step, &o->shape, numel, out_sym);
    infer_set_output_sym(c, k, out_sym, (int)numel);
}

static int split_sizes(const infer *c, llmc_affine dim, llmc_affine *sizes)
{
    int n = c->n->n_outputs, cnt, rc;
    char b[96];
    if (input(c, 1)) {
        if (llmc_node_attr(c->g, c->id, "num_outputs"))
            return infer_fail(c, LLMC_E_INPUT, "both the split input and num_outputs are given");
        if ((rc = infer_known_ints(c, 1, sizes, &cnt, "split")))
            return rc;
        if (cnt != n)
            return infer_fail(c, LLMC_E_INPUT, "split has %d entries for %d outputs", cnt, n);
        llmc_affine sum = llmc_aff_const(0);
        for (int i = 0; i < n; i++)
            if (!llmc_aff_add(sum, sizes[i], &sum))
                return infer_fail(c, LLMC_E_UNSUPPORTED, "dim overflow");
        return infer_require_equal_dims(c, sum, dim, "sum of split sizes and the dim");
    }
    const llmc_attr *parts = llmc_node_attr(c->g, c->id, "num_outputs");   /* opset 18 */
    if (parts && parts->i != n)
        return infer_fail(c, LLMC_E_INPUT, "num_outputs %lld for %d outputs", (long long)parts->i, n);
    /* No split input: equal parts; with num_outputs (opset 18) a constant
     * dim that does not divide takes ceil(dim / n) per part, the last part
     * what remains. */
    if (dim.c % n == 0 && dim.s % n == 0 && dim.p % n == 0) {
        for (int i = 0; i < n; i++)
            sizes[i] = (llmc_affine){dim.c / n, dim.s / n, dim.p / n};
        return LLMC_OK;
    }
    if (!parts)
        return infer_fail(c, LLMC_E_INPUT, "dim %s does not split into %d equal parts", aff_str(dim, b), n);
    if (!llmc_aff_is_const(dim))
        return infer_fail(c, LLMC_E_UNSUPPORTED, "dim %s: unequal parts of a dim that depends on S or P",
                          aff_str(dim, b));
    int64_t chunk = (dim.c + n - 1) / n;
    if (dim.c <= chunk * (n - 1))
        return infer_fail(c, LLMC_E_INPUT, "dim %s leaves no last part for num_outputs %d", aff_str(dim, b), n);
    for (int i = 0; i < n; i++)
        sizes[i] = llmc_aff_const(i < n - 1 ? chunk : dim.c - chunk * (n - 1));
    return LLMC_OK;
}

int infer_split(infer *c)
{
    const llmc_value *x = input(c, 0);
    llmc_affine sizes[LLMC_MAX_SYM_ELEMS];
    int axis, rc;
    if (c->n->n_outputs > LLMC_MAX_SYM_ELEMS)
        return infer_fail(c, LLMC_E_UNSUPPORTED, "more than %d outputs", LLMC_MAX_SYM_ELEMS);
    if ((rc = infer_normalize_axis(c, llmc_node_attr_int(c->g, c->id, "axis", 0), x->shape.rank, &axis)) ||
        (rc = split_sizes(c, x->shape.dims[axis], sizes)))
        return rc;
    llmc_affine offset = llmc_aff_const(0);
    for (int k = 0; k < c->n->n_outputs; k++) {
        llmc_shape out = x->shape;
        out.dims[axis] = sizes[k];
        infer_set_output(c, k, x->dtype, &out);
        if (llmc_aff_is_const(offset))
            split_sym(c, k, axis, offset.c);
        llmc_aff_add(offset, sizes[k], &offset);
    }
    return LLMC_OK;
}

int infer_expand(infer *c)
{
    const llmc_value *x = input(c, 0);
    llmc_affine target[LLMC_MAX_SYM_ELEMS];
    int n, rc;
    if ((rc = infer_known_ints(c, 1, target, &n, "shape")))
        return rc;
    if (n > LLMC_MAX_RANK)
        return infer_fail(c, LLMC_E_UNSUPPORTED, "rank %d above %d", n, LLMC_MAX_RANK);
    llmc_shape want = make_shape(n, target), out;
    if ((rc = infer_broadcast_shapes(c, &x->shape, &want, &out)))
        return rc;
    infer_set_output(c, 0, x->dtype, &out);

    llmc_affine in[LLMC_MAX_SYM_ELEMS], vals[LLMC_MAX_SYM_ELEMS];
    int64_t numel;
    if (!llmc_shape_numel_const(&out, &numel) || numel == 0 || numel > LLMC_MAX_SYM_ELEMS ||
        llmc_value_ints(c->g, input_id(c, 0), in, LLMC_MAX_SYM_ELEMS) < 0)
        return LLMC_OK;
    for (int64_t i = 0; i < numel; i++)
        vals[i] = in[infer_broadcast_source(&out, &x->shape, i)];
    infer_set_output_sym(c, 0, vals, (int)numel);
    return LLMC_OK;
}
