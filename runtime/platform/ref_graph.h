/* Internal to the reference delegate (llmc_ref_delegate.h): a prepared
 * subgraph, its graph.  ref_prepare.c proves every op of a subgraph
 * runnable and builds the graph: a step per op, the int8 weight rows and
 * per-channel scales of every Linear (unpacked with llmc_rt_sg_weight_row)
 * and a buffer per intermediate tensor, all sized for the subgraph's rows.
 * ref_kernels.c runs the steps; ref_delegate.c hands runs to its worker.
 *
 * Boundary tensors (inputs, then outputs) are the io buffers of each
 * execute; weights are read where the plan holds them.  A QuantizeRows
 * output is a plain int8 [M, K] buffer, never the CPU's QActTiles bytes: it
 * is internal to the subgraph. */
#ifndef LLMC_REF_GRAPH_H
#define LLMC_REF_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "llmc_rt.h"
#include "llmc_rt_resolver.h" /* the kernels it runs the ops with */

/* A tensor of a graph as the steps use it. */
typedef struct {
    int64_t rows, cols, count;  /* product of the leading dims, last dim, elements */
    const void *weight;         /* a weight: its bytes in the plan */
    void *own;                  /* an intermediate: the graph's buffer */
    /* prepare only */
    bool written;               /* the caller (inputs) or an earlier op wrote it */
    float act_scale;            /* int8 activations: the QuantizeRows scale */
} ref_tensor;

typedef struct ref_graph ref_graph;
typedef struct ref_step ref_step;
typedef void (*ref_run_fn)(const ref_graph *g, const ref_step *s);

struct ref_step {
    int code;
    ref_run_fn run;                        /* its kernel (ref_kernels.c) */
    float epsilon;                         /* RMSNorm, LayerNorm */
    float scale;                           /* QuantizeRows; Linear: its x's */
    uint32_t n_in, n_out;
    uint32_t in[LLMC_RT_SG_OP_IO], out[LLMC_RT_SG_OP_IO];
    int8_t *wq;                            /* Linear: W [N][K] */
    float *wscale;                         /* Linear: W's scale per output channel */
    bool bias, residual;                   /* Linear */
    llmc_rt_unary_fn unary;
    llmc_rt_binary_fn binary;
};

struct ref_graph {
    uint32_t index;                        /* the subgraph's, for messages */
    char name[64];
    uint32_t n_io, n_tensors, n_steps;
    ref_tensor *tensors;
    ref_step *steps;
    void **io;                             /* the running job's buffers */
};

/* Proves every op of sg runnable and builds its graph into *out (NULL on
 * failure: LLMC_RT_E_DELEGATE naming the subgraph, the op and why). */
llmc_rt_status ref_graph_build(const llmc_rt_subgraph *sg, ref_graph **out, llmc_rt_error *err);
/* Frees g and everything it owns (NULL is fine). */
void ref_graph_free(ref_graph *g);
/* Runs every step of g, in order, on g->io. */
void ref_graph_run(const ref_graph *g);

/* The kernels of the steps (ref_kernels.c), by op. */
void ref_run_norm(const ref_graph *g, const ref_step *s);
void ref_run_quantize(const ref_graph *g, const ref_step *s);
void ref_run_linear(const ref_graph *g, const ref_step *s);
void ref_run_binary(const ref_graph *g, const ref_step *s);
void ref_run_unary(const ref_graph *g, const ref_step *s);
void ref_run_reshape(const ref_graph *g, const ref_step *s);

/* err->code = code and the message; returns code (err may be NULL). */
llmc_rt_status ref_fail(llmc_rt_error *err, llmc_rt_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static inline const char *ref_text(const char *s)
{
    return s ? s : "";
}

#endif
