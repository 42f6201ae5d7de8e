/* What session.c offers the runtime's other files: tensor views at a call's
 * (S, P) for the exec functions (session_ops.c) and the steps of a run for
 * chunked prefill (chunked_*.c). */
#ifndef LLMC_RT_SESSION_H
#define LLMC_RT_SESSION_H

#include "session_prepared.h"

/* session.c: tensor t viewed at (S, P), an arena tensor in `arena` (a
 * copy of the session's arena, which a chunked prefill sizes so that every
 * tensor fits at S <= its chunk; NULL: the session's own); fails when its
 * dims overflow or need more bytes than the arena reserved for it. */
llmc_rt_status rt_session_view(const llmc_rt_session *s, uint8_t *arena, uint32_t t,
                               int64_t S, int64_t P, rt_view *v, llmc_rt_error *err);

static inline llmc_rt_status rt_call_view(const struct llmc_rt_op_call *c, uint32_t t, rt_view *v,
                                          llmc_rt_error *err)
{
    return rt_session_view(c->s, c->arena, t, c->S, c->P, v, err);
}

/* session.c, for chunked_run.c: ops [first, first + n) at (S, P) over
 * `arena`, each between the session observer's two calls; the LLM path's
 * inputs (tokens at S, P) placed into an arena and its outputs (the last
 * token's logits) taken from one. */
llmc_rt_status rt_session_run_ops(llmc_rt_session *s, uint32_t first, uint32_t n, int64_t S,
                                  int64_t P, uint8_t *arena, uint64_t *moved,
                                  llmc_rt_error *err);
llmc_rt_status rt_session_feed_inputs(llmc_rt_session *s, const int64_t *tokens, int64_t S,
                                      int64_t P, uint8_t *arena, uint64_t *moved,
                                      llmc_rt_error *err);
llmc_rt_status rt_session_take_outputs(llmc_rt_session *s, int64_t S, int64_t P,
                                       uint8_t *arena, float *logits, uint64_t *moved,
                                       llmc_rt_error *err);

#endif
