/* Internal: a chunked prefill's state (llmc_rt_chunked_* in llmc_rt.h).
 * chunked_plan.c proves the plan's subgraphs, describes them for the
 * delegate and cuts a chunk into nodes; chunked_run.c schedules the nodes
 * of every chunk over the CPU and the delegate (paper 003 §3.4).
 *
 * A chunk's nodes, in plan order: each subgraph is one node on the
 * delegate lane, each run of ops between them one node on the CPU lane.
 * Node j of chunk i waits for node j - 1 of chunk i (Eq. 3) and, when it
 * holds an Attention op (the KV caches), for node j of chunk i - 1 (Eq. 2).
 * Chunks in flight each have their own copy of the arena (a lane), so a
 * chunk's tensors never share bytes with another's: lifetimes stay the
 * serial ones within a chunk, and chunk i + lanes starts when chunk i has
 * finished. */
#ifndef LLMC_RT_CHUNKED_INTERNAL_H
#define LLMC_RT_CHUNKED_INTERNAL_H

#include "plan_format.h"
#include "session.h"

#define CHUNK_MAX_LANES 8u
#define NO_SUBGRAPH UINT32_MAX

enum { NODE_PENDING, NODE_RUNNING, NODE_DONE };

/* Node costs are capped here, so that Eq. 6's sums of three fit int64. */
#define RT_CHUNK_COST_CAP ((uint64_t)1 << 56)

typedef struct {
    uint32_t first_op, n_ops;
    uint32_t subgraph;   /* its subgraph (the delegate lane), or NO_SUBGRAPH (the CPU's) */
    bool attention;      /* holds an Attention op (Eq. 2) */
    uint64_t cost;       /* its time, relative (Eq. 6's T): multiply-adds by default */
} rt_chunk_node;

struct llmc_rt_chunked {
    llmc_rt_session *s;
    llmc_rt_delegate delegate;
    bool has_delegate;
    uint32_t chunk;             /* C */
    uint32_t lanes, max_chunks;
    uint32_t n_nodes;           /* the last chunk's */
    uint32_t body_nodes;        /* the other chunks': up to the last Attention (the rest
                                   only computes the logits) */
    rt_chunk_node *nodes;
    uint8_t *state;             /* [max_chunks][n_nodes] NODE_* */
    uint8_t *lane[CHUNK_MAX_LANES]; /* chunk i's arena: lane[i % lanes]; 0 the session's */
    uint32_t n_subgraphs, prepared;
    llmc_rt_subgraph *subgraphs;
    const llmc_rt_sg_tensor *sg_tensors; /* every description's tensors, in order, */
    const uint32_t *sg_ids;              /* and their plan tensor indices */
    void **graphs;              /* the delegate's, per subgraph */
    void **io;                  /* one execution's buffers */
    int out_of_order;
    llmc_rt_chunk_observer observer;
    void *observer_ctx;
    llmc_rt_chunk_logits_fn logits_fn; /* every chunk's logits (eval) */
    void *logits_ctx;
    /* the prefill in progress */
    const int64_t *tokens;
    uint32_t n_tokens, n_chunks;
    int64_t P0;
    bool busy;                  /* the delegate runs (busy_chunk, busy_node) */
    uint32_t busy_chunk, busy_node;
    uint64_t moved;
};

/* The memory layout, from the plan alone (llmc_rt_chunked_memory). */
typedef struct {
    uint32_t chunk, n_subgraphs, max_nodes, max_chunks, max_io;
    uint64_t tensor_entries, op_entries; /* bounds for the descriptions */
    uint64_t lane_bytes;                 /* a lane: the arena at S <= C */
} rt_chunk_sizes;

llmc_rt_status rt_chunk_measure(const llmc_rt_plan *p, uint32_t context, rt_chunk_sizes *z,
                                llmc_rt_error *err);
/* Proves the subgraphs against the session's prepared tables and fills
 * c->subgraphs (descriptions carved from `tensors` with their plan indices
 * in `ids`, and `ops`; z's entries of each), c->nodes, c->n_nodes and
 * c->body_nodes; descs: room for the decoded Subgraph tables. */
llmc_rt_status rt_chunk_describe(llmc_rt_chunked *c, const rt_chunk_sizes *z,
                                 llmc_rt_sg_tensor *tensors, uint32_t *ids, llmc_rt_sg_op *ops,
                                 rt_subgraph_desc *descs, llmc_rt_error *err);

/* Rows of chunk i (C, or what is left in the last one) and its P. */
static inline uint32_t rt_chunk_rows(const llmc_rt_chunked *c, uint32_t i)
{
    uint32_t start = i * c->chunk;
    return c->n_tokens - start < c->chunk ? c->n_tokens - start : c->chunk;
}

#endif
