/* Prefill through a plan's NPU chunk subgraphs for the CLI (llmc run,
 * eval, bench): the runtime's chunked prefill with the reference delegate
 * (runtime/platform/llmc_ref_delegate.h) or with the CPU running the
 * subgraphs too, timed node by node for a Chrome trace (Perfetto) and the
 * delegate's utilization and bubble rate. */
#ifndef LLMC_NPU_PREFILL_H
#define LLMC_NPU_PREFILL_H

#include <stdbool.h>
#include <stdint.h>

#include "support/diag.h"
#include "llmc_rt_internal.h"

enum { LLMC_NPU_OFF, LLMC_NPU_CPU, LLMC_NPU_REF };

typedef struct {
    int mode;               /* LLMC_NPU_*: --delegate cpu | ref; OFF: plain prefill */
    uint32_t lanes;         /* --lanes: chunks in flight (default 2) */
    bool in_order;          /* --in-order: each lane takes its nodes in chunk order */
    const char *trace;      /* --trace FILE.json: every node of every prefill */
} llmc_npu_options;

/* What the last prefill did: wall time, and the delegate lane's busy time
 * and span (first start to last end). */
typedef struct {
    double wall_ns, busy_ns, span_ns;
    uint32_t tokens, delegate_nodes, cpu_nodes;
} llmc_npu_figures;

static inline double llmc_npu_utilization(const llmc_npu_figures *f)
{
    return f->wall_ns > 0 ? f->busy_ns / f->wall_ns : 0;
}
/* Share of the delegate's span it sat idle (paper 003 §3.4's bubbles). */
static inline double llmc_npu_bubble_rate(const llmc_npu_figures *f)
{
    return f->span_ns > 0 ? 1.0 - f->busy_ns / f->span_ns : 0;
}

typedef struct llmc_npu llmc_npu;

/* Chunked prefill state for session s (mode not OFF); memory of its own. */
int llmc_npu_start(llmc_npu **out, llmc_rt_session *s, const llmc_npu_options *o,
                   llmc_error *err);
int llmc_npu_prefill(llmc_npu *n, const int64_t *tokens, uint32_t count, float *logits,
                     llmc_error *err);
void llmc_npu_last(const llmc_npu *n, llmc_npu_figures *f);
/* Every chunk's logits to fn (llmc_rt_chunked_set_logits). */
void llmc_npu_set_logits(llmc_npu *n, llmc_rt_chunk_logits_fn fn, void *ctx);
/* Nodes of a chunk, and the median time (ns) of each node over every
 * chunk of every prefill so far into ns[0, nodes) (0: never ran). */
uint32_t llmc_npu_nodes(const llmc_npu *n);
const llmc_rt_chunked *llmc_npu_chunked(const llmc_npu *n);
/* Drops what was recorded so far (a warm-up's nodes). */
int llmc_npu_forget(llmc_npu *n);
int llmc_npu_node_medians(const llmc_npu *n, uint64_t *ns);
/* Writes the trace (if asked) and frees everything; NULL is fine. */
int llmc_npu_stop(llmc_npu *n, llmc_error *err);

#endif
