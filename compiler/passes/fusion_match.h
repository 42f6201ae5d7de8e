/* What the fusion passes share (and constant folding, for names): walking a candidate subgraph node by node,
 * checking its constants, explaining why a candidate was rejected, and
 * replacing the matched nodes with one fused node.
 *
 * A match collects node ids as it walks.  Casts to float of a float value
 * (identity Casts, which torch leaves around norms) are stepped over and
 * collected too.  Before rewriting, llmc_match_is_closed() checks that no
 * value computed inside the match except the root's outputs is read outside
 * it: an intermediate someone else needs blocks the rewrite. */
#ifndef LLMC_FUSION_MATCH_H
#define LLMC_FUSION_MATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "support/diag.h"
#include "ir/ir.h"
#include "ir/llmc_ops.h"
#include "match.h"
#include "pass.h"

#define LLMC_MATCH_MAX_NODES 24

typedef struct {
    llmc_graph *g;
    const llmc_pass_ctx *ctx;
    const char *pass;                   /* names the pass in explanations */
    int nodes[LLMC_MATCH_MAX_NODES];
    int n_nodes;
    int why_node;                       /* first rejection: node and reason */
    char why[256];
} llmc_match;

void llmc_match_init(llmc_match *m, llmc_graph *g, const llmc_pass_ctx *ctx, const char *pass);
/* Records why the candidate failed at `node` (the first reason is kept)
 * and returns false, so a matcher can `return llmc_match_reject(...)`. */
bool llmc_match_reject(llmc_match *m, int node, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* With ctx->explain, prints the recorded reason to ctx->log as
 * "<pass>: node 'NAME' (#ID, OP) not fused: <why>". */
void llmc_match_explain(const llmc_match *m);

/* Adds a node to the match (once); false when the match is full. */
bool llmc_match_add(llmc_match *m, int node);
/* The producer of v when it is the op `op_type`; it and the identity Casts
 * in between are collected.  -1 otherwise, and nothing is collected. */
int llmc_fusion_producer(llmc_match *m, int v, const char *op_type);
/* The only reader of v when it is the op `op_type`; it and the identity
 * Casts in between are collected.  -1, nothing collected, when v has other
 * readers, is a graph output or is read by another op. */
int llmc_match_consumer(llmc_match *m, int v, const char *op_type);
/* Collects the identity Casts above v. */
bool llmc_match_add_casts(llmc_match *m, int v);
/* v with identity Casts above it stepped over (not collected). */
int llmc_strip_casts(const llmc_graph *g, int v);
/* The input of binary node `node` other than `v`; -1 if v is not an input. */
int llmc_other_input(const llmc_graph *g, int node, int v);

/* Does x stand for the constant `want`?  |x - w| <= 1e-6 |want| for w = want
 * or w = want rounded to float16 (the importer widens a float16 model's
 * constants exactly, so 0.044715 arrives as 0.044708251953125): the one
 * rule every pattern constant is compared by.  Exactly 0 when want is 0. */
bool llmc_value_near(double x, double want);
/* llmc_value_near's first case only: x is want, not its float16 rounding. */
bool llmc_value_exact(double x, double want);
/* llmc_match_const_scalar (match.h) and llmc_value_near. */
bool llmc_const_near(const llmc_graph *g, int v, double want);
/* v is a float constant of shape [len]. */
bool llmc_const_vector(const llmc_graph *g, int v, llmc_affine len);
/* v is a float constant of constant shape [rows, cols]. */
bool llmc_const_matrix(const llmc_graph *g, int v);
/* True when constant W [H, V] is constant E [V, H] transposed, byte for
 * byte (a tied LM head): cached hashes first, then the bytes chunk by chunk. */
bool llmc_const_holds_transpose(const llmc_value *e, const llmc_value *w);
/* Gemm node with alpha = beta = 1 and transA = 0: A B + C, what MatMul
 * [+ bias] computes once B is [K, N]. */
bool llmc_gemm_is_plain(const llmc_graph *g, int node);
/* A new constant [K, N]: the float constant matrix b [N, K] transposed
 * (Gemm's transB), lazily (a view of b's bytes); -1 on OOM. */
int llmc_add_transposed_const(llmc_graph *g, int b);
/* Gemm's C as a bias [N]: C itself, a [N] copy of a [1, N] C, or -1 when
 * absent (c < 0); -2 when C is something else, -3 on OOM. */
int llmc_gemm_bias(llmc_graph *g, int c, int64_t n);

/* No output of a collected node other than `root`'s is read outside the
 * match or is a graph output.  Explains the first violation. */
bool llmc_match_is_closed(llmc_match *m, int root);
/* Erases every collected node and adds the node `op_type` (llmc domain, or
 * the default domain when `onnx` is set) that takes over root's outputs and
 * name.  Returns the new node id, -1 on OOM. */
int llmc_match_replace(llmc_match *m, int root, const char *op_type, bool onnx, const int *inputs,
                       int n_inputs);
/* The same with explicit outputs; the new node takes node `named`'s name. */
int llmc_match_replace_outputs(llmc_match *m, int named, const char *op_type, bool onnx, const int *inputs,
                               int n_inputs, const int *outputs, int n_outputs);
/* A new constant value named base + suffix (made unique) that owns a copy
 * of `data`; -1 on OOM. */
int llmc_add_const(llmc_graph *g, const char *base, const char *suffix, int dtype, const llmc_shape *shape,
                   const void *data, uint64_t nbytes);
/* A new float32 constant [rows, cols] named base + suffix (made unique)
 * whose bytes are the lazy `view` (const_view.h; the caller's reference is
 * taken over, also on failure); -1 on OOM or a NULL view. */
int llmc_add_const_view(llmc_graph *g, const char *base, const char *suffix, llmc_view *view);

/* Calls visit(g, ctx, node) for every node live when the walk started, in
 * topological order, skipping nodes an earlier visit erased; visit returns
 * 1 when it fused something, 0 when not, -1 on OOM.  *count gets the sum.
 * LLMC_OK, or LLMC_E_NOMEM / LLMC_E_INPUT (cycle) naming `pass`. */
typedef int (*llmc_fusion_visit)(llmc_graph *g, const llmc_pass_ctx *ctx, int node);
int llmc_fusion_walk(llmc_graph *g, const llmc_pass_ctx *ctx, const char *pass, llmc_fusion_visit visit,
                     int *count, llmc_error *err);

/* llmc_fusion_walk with each of visits[0..n), in order; counts[i] gets the
 * count of walk i. */
int llmc_fusion_walks(llmc_graph *g, const llmc_pass_ctx *ctx, const char *pass, const llmc_fusion_visit *visits,
                      int n, int *counts, llmc_error *err);


#endif
