/* lora-reorder (paper 002 §5.5): a LoRA bypass written in the naive order
 * forms the dense out x in product of its two rank-r factors and multiplies
 * the activations by it; associativity gives the same result through the
 * r-wide intermediate, never forming the product:
 *
 *   (a) MatMul(x, MatMul(L, R))              -> MatMul(MatMul(x, L), R)
 *   (b) MatMul(x, Transpose(MatMul(B, A)))   -> MatMul(MatMul(x, A^T), B^T)
 *       i.e. x (B A)^T, torch's `x @ (B @ A).t()`; A^T and B^T become new
 *       constants, transposed here
 *   (c) MatMul(MatMul(L, R), x)              -> MatMul(L, MatMul(R, x))
 *       i.e. (B A) x = B (A x)
 *
 * The factors must be rank-2 constants with the inner dim r smaller than
 * both outer dims (otherwise the dense product is no bigger), and the
 * product (and the Transpose) must have no other reader.  Per token the
 * MACs go from in*out to r*(in+out), and so do the weight elements: the
 * dense product is what constant folding would otherwise have stored.  A
 * scale Mul after the bypass is not touched.
 *
 * It runs before constant folding, which would fold the product of two
 * constants into the dense delta. */
#include <stdlib.h>
#include <string.h>

#include "ir/const_view.h"
#include "ir/llmc_ops.h"
#include "pass.h"

#define PASS_NAME "lora-reorder"

typedef struct {
    int outer;              /* the MatMul reading the dense product */
    int x;                  /* the activations */
    bool x_first;           /* forms (a)/(b): x · W; form (c): W · x */
    int product;            /* MatMul(factor0, factor1) */
    int transpose;          /* Transpose node of form (b), or -1 */
    int64_t in, r, out;     /* W is in x out in forms (a)/(b), out x in in (c) */
} bypass;

typedef struct {
    llmc_graph *g;
    const llmc_pass_ctx *ctx;
    int rewritten, refused;
    int64_t macs_before, macs_after, bytes_before, bytes_after;
} reorder;

static int oom(llmc_error *err)
{
    return llmc_fail(err, LLMC_E_NOMEM, PASS_NAME ": out of memory");
}

/* ---- matching ---- */

/* The node producing v if it is the ONNX op `op`, else -1. */
static int producer_op(const llmc_graph *g, int v, const char *op)
{
    int p = v >= 0 ? g->values[v].producer : -1;
    return p >= 0 && !g->nodes[p].dead && llmc_is_onnx_op(&g->nodes[p], op) ? p : -1;
}

static bool is_matrix_transpose(const llmc_graph *g, int node)
{
    const llmc_attr *perm = llmc_node_attr(g, node, "perm");
    /* No perm reverses the axes: [1, 0] for a matrix. */
    return !perm || (perm->n_ints == 2 && perm->ints[0] == 1 && perm->ints[1] == 0);
}

/* Finds the product of two constants that `outer` multiplies x by. */
static bool find_product(const llmc_graph *g, int outer, bypass *b)
{
    const llmc_node *n = &g->nodes[outer];
    if (!llmc_is_onnx_op(n, "MatMul") || n->n_inputs != 2)
        return false;
    *b = (bypass){.outer = outer, .x = n->inputs[0], .x_first = true, .transpose = -1};
    int transpose = producer_op(g, n->inputs[1], "Transpose");
    if (transpose >= 0 && is_matrix_transpose(g, transpose)) {
        b->transpose = transpose;
        b->product = producer_op(g, g->nodes[transpose].inputs[0], "MatMul");
    } else {
        b->product = producer_op(g, n->inputs[1], "MatMul");
    }
    if (b->product < 0) {
        b->transpose = -1;
        b->x = n->inputs[1];
        b->x_first = false;
        b->product = producer_op(g, n->inputs[0], "MatMul");
    }
    if (b->product < 0)
        return false;
    const llmc_node *p = &g->nodes[b->product];
    return p->n_inputs == 2 && g->values[p->inputs[0]].is_const && g->values[p->inputs[1]].is_const;
}

static bool const_matrix(const llmc_value *v, int64_t *rows, int64_t *cols)
{
    if (v->is_graph_input || v->shape.rank != 2 || !llmc_aff_is_const(v->shape.dims[0]) ||
        !llmc_aff_is_const(v->shape.dims[1]))
        return false;
    *rows = v->shape.dims[0].c;
    *cols = v->shape.dims[1].c;
    return v->konst.nbytes == (uint64_t)(*rows * *cols) * llmc_dtype_size(v->dtype);
}

/* The dim of x that W contracts with. */
static llmc_affine contracted_dim(const llmc_graph *g, const bypass *b)
{
    const llmc_shape *s = &g->values[b->x].shape;
    return s->dims[b->x_first ? s->rank - 1 : s->rank - 2];
}

/* Checks the factors, their sizes and the readers; says why not otherwise. */
static bool rewritable(const reorder *ro, bypass *b)
{
    const llmc_graph *g = ro->g;
    const llmc_node *p = &g->nodes[b->product];
    const llmc_value *f0 = &g->values[p->inputs[0]], *f1 = &g->values[p->inputs[1]];
    const llmc_value *x = &g->values[b->x];
    int64_t rows0, cols0, rows1, cols1;
    const char *why = NULL;
    if (!const_matrix(f0, &rows0, &cols0) || !const_matrix(f1, &rows1, &cols1))
        why = "the factors are not constant matrices (an initializer that is a graph input may change)";
    else if (cols0 != rows1 || f0->dtype != f1->dtype || f0->dtype != x->dtype)
        why = "the factors' inner dims or dtypes disagree";
    else if (x->shape.rank < (b->x_first ? 1 : 2))
        why = "x has too small a rank";
    else if (llmc_graph_use_count(g, p->outputs[0]) != 1 ||
             (b->transpose >= 0 && llmc_graph_use_count(g, g->nodes[b->transpose].outputs[0]) != 1))
        why = "the dense product has other readers, so it is needed anyway";
    if (why) {
        llmc_pass_explain(ro->ctx, PASS_NAME, g, b->outer, "%s", why);
        return false;
    }
    b->r = cols0;
    /* W = f0 f1, or its transpose in form (b): in and out swap places. */
    bool swapped = b->transpose >= 0 || !b->x_first;
    b->in = swapped ? cols1 : rows0;
    b->out = swapped ? rows0 : cols1;
    if (b->r >= b->in || b->r >= b->out) {
        llmc_pass_explain(ro->ctx, PASS_NAME, g, b->outer, "inner dim r = %lld is not smaller than both "
                          "outer dims (%lld, %lld)", (long long)b->r, (long long)b->in, (long long)b->out);
        return false;
    }
    if (!llmc_aff_eq(contracted_dim(g, b), llmc_aff_const(b->in))) {
        llmc_pass_explain(ro->ctx, PASS_NAME, g, b->outer, "x's contracted dim is not %lld", (long long)b->in);
        return false;
    }
    return true;
}

/* ---- rewriting ---- */

/* A new constant holding the transpose of matrix `v`. */
static int transposed_const(llmc_graph *g, int v)
{
    const llmc_value *src = &g->values[v];
    int64_t rows = src->shape.dims[0].c, cols = src->shape.dims[1].c;
    size_t elem = llmc_dtype_size(src->dtype);
    uint8_t *t = malloc((size_t)src->konst.nbytes + 1);
    char *name = llmc_graph_unique_name(g, src->name, ".T");
    const uint8_t *s = llmc_const_bytes(&src->konst);
    int id = t && name && (s || !src->konst.nbytes) ? llmc_graph_add_value(g, name, src->dtype) : -1;
    if (id >= 0) {
        s = llmc_const_bytes(&g->values[v].konst);   /* adding a value may move g->values */
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < cols; j++)
                memcpy(t + (size_t)(j * rows + i) * elem, s + (size_t)(i * cols + j) * elem, elem);
        llmc_shape shape = {.rank = 2, .dims = {llmc_aff_const(cols), llmc_aff_const(rows)}};
        if (llmc_graph_set_const(g, id, g->values[v].dtype, &shape, t, g->values[v].konst.nbytes))
            id = -1;
    }
    free(t);
    free(name);
    return id;
}

/* The r-wide intermediate: x's shape with the contracted dim set to r. */
static int intermediate_value(llmc_graph *g, const bypass *b)
{
    int y = g->nodes[b->outer].outputs[0];
    char *name = llmc_graph_unique_name(g, g->values[y].name, "/lora_r");
    int t = name ? llmc_graph_add_value(g, name, g->values[b->x].dtype) : -1;
    free(name);
    if (t >= 0) {
        llmc_shape *s = &g->values[t].shape;
        *s = g->values[b->x].shape;
        s->dims[b->x_first ? s->rank - 1 : s->rank - 2] = llmc_aff_const(b->r);
    }
    return t;
}

static int add_matmul(llmc_graph *g, const char *name, int a, int b, int out)
{
    int ins[2] = {a, b};
    return llmc_graph_add_node(g, "MatMul", name, ins, 2, &out, 1);
}

/* Replaces outer, product and transpose by two thin MatMuls. */
static int rewrite(reorder *ro, const bypass *b, llmc_error *err)
{
    llmc_graph *g = ro->g;
    const int *factors = g->nodes[b->product].inputs;
    int f0 = factors[0], f1 = factors[1];
    if (b->transpose >= 0) {    /* x (f0 f1)^T = x f1^T f0^T */
        int t0 = transposed_const(g, f0), t1 = transposed_const(g, f1);
        if (t0 < 0 || t1 < 0)
            return oom(err);
        f0 = t1;
        f1 = t0;
    }
    int y = g->nodes[b->outer].outputs[0], t = intermediate_value(g, b);
    char *name = llmc_graph_unique_name(g, g->nodes[b->outer].name, "/lora");
    if (t < 0 || !name) {
        free(name);
        return oom(err);
    }
    llmc_graph_erase_node(g, b->outer);
    llmc_graph_erase_node(g, b->product);
    if (b->transpose >= 0)
        llmc_graph_erase_node(g, b->transpose);
    /* (a)/(b): t = x f0, y = t f1.  (c): t = f1 x, y = f0 t. */
    int rc = b->x_first ? (add_matmul(g, name, b->x, f0, t) < 0 || add_matmul(g, name, t, f1, y) < 0)
                        : (add_matmul(g, name, f1, b->x, t) < 0 || add_matmul(g, name, f0, t, y) < 0);
    free(name);
    return rc ? oom(err) : LLMC_OK;
}

static void account(reorder *ro, const bypass *b)
{
    int64_t elem = (int64_t)llmc_dtype_size(ro->g->values[b->x].dtype);
    ro->rewritten++;
    ro->macs_before += b->in * b->out;
    ro->macs_after += b->r * (b->in + b->out);
    ro->bytes_before += b->in * b->out * elem;
    ro->bytes_after += b->r * (b->in + b->out) * elem;
}

static int run_lora_reorder(llmc_graph *g, const llmc_pass_ctx *ctx, llmc_error *err)
{
    reorder ro = {.g = g, .ctx = ctx};
    int n_nodes = g->n_nodes;   /* the MatMuls added here are not candidates */
    for (int i = 0; i < n_nodes; i++) {
        bypass b;
        if (g->nodes[i].dead || !find_product(g, i, &b))
            continue;
        if (!rewritable(&ro, &b)) {
            ro.refused++;
            continue;
        }
        int rc = rewrite(&ro, &b, err);
        if (rc)
            return rc;
        account(&ro, &b);
    }
    if (ro.rewritten + ro.refused > 0)
        llmc_pass_detail(ctx, "%d bypasses: %lld -> %lld MACs/token, %lld -> %lld weight bytes%s", ro.rewritten,
                         (long long)ro.macs_before, (long long)ro.macs_after, (long long)ro.bytes_before,
                         (long long)ro.bytes_after, ro.refused ? " (some left as they were: see --explain)" : "");
    return LLMC_OK;
}

const llmc_pass llmc_pass_lora_reorder = {PASS_NAME, run_lora_reorder};
