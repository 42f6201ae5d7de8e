/* Optional platform file (ref_delegate.c, built into libllmcrt_threads.a,
 * never into libllmcrt.a): a reference delegate (llmc_rt.h "NPU chunk
 * subgraphs and delegates") that behaves like an NPU driver, so that
 * chunked prefill can be tested and traced without one.
 *
 *   llmc_ref_delegate *d = llmc_ref_delegate_create();
 *   llmc_rt_delegate table;
 *   llmc_ref_delegate_table(d, &table);
 *   llmc_rt_chunked_init(&c, &session, &table, lanes, mem, size, &err);
 *   ... llmc_rt_chunked_prefill ...
 *   llmc_rt_chunked_release(c);
 *   llmc_ref_delegate_destroy(d);
 *
 * Like an NPU it takes static shapes only (every buffer is sized at prepare
 * for the subgraph's rows), float32 tensors, per-tensor int8 activations
 * (QuantizeRows with a static scale, read only by Linears) and per-channel
 * Int8 weights (QWeightTiles with group >= K), and runs its jobs on a
 * thread of its own: execute hands the job over and returns; wait blocks on
 * a condition variable (block = 1) or reports whether it finished.
 *
 * prepare accepts RMSNorm; LayerNorm with one output over the last axis;
 * QuantizeRows with scale > 0 into a QActTiles tensor internal to the
 * subgraph; Linear over it (bias, residual, outputs split along the last
 * axis); Binary Add, Sub, Mul, Div, Max, Min, SwiGLU, GeGLU of equal dims or with
 * b a Dense weight of a's trailing dims; Unary Identity, Neg, Abs, Sqrt,
 * Exp, Tanh, Sigmoid, Relu, Silu, Gelu, GeluTanh; Reshape.  Anything else is
 * refused with LLMC_RT_E_DELEGATE and a message naming the subgraph, the op
 * (index, code and name) and why.  Weights are unpacked at prepare into the
 * graph's own int8 rows and float scales (its "graph build"); a graph also
 * owns the buffers of the subgraph's intermediates.
 *
 * One execution at a time per delegate: from execute until wait reports it
 * finished, another execute is refused ("busy").  A prepared graph cannot
 * fail at run time: wait returns LLMC_RT_OK for every finished job.  The
 * table's functions take the calling thread (one at a time), as the
 * runtime's chunked prefill calls them. */
#ifndef LLMC_REF_DELEGATE_H
#define LLMC_REF_DELEGATE_H

#include <stdint.h>

#include "llmc_rt.h"

typedef struct llmc_ref_delegate llmc_ref_delegate;

/* Starts the delegate's thread; NULL when out of memory or threads. */
llmc_ref_delegate *llmc_ref_delegate_create(void);
/* Joins the thread (after the job in flight, if any) and frees the
 * delegate (NULL is fine).  Release its graphs first. */
void llmc_ref_delegate_destroy(llmc_ref_delegate *d);
/* Fills the function table (ctx = d). */
void llmc_ref_delegate_table(llmc_ref_delegate *d, llmc_rt_delegate *out);
/* CLOCK_MONOTONIC nanoseconds at which the last execution wait reported
 * finished started and ended on the delegate's thread (for traces); 0, 0
 * before any.  From the thread that calls the table's functions. */
void llmc_ref_delegate_last_run(const llmc_ref_delegate *d, uint64_t *start_ns,
                                uint64_t *end_ns);

#endif
