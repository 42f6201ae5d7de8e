/* The plan verifier's checks after the ops (verify.h): the IO bindings, the
 * pass records, the segments' placement and hashes, the tokenizer's segment
 * and the size of the KV store. */
#include <stdint.h>

#include "tensor_traits.h"
#include "verify.h"
#include "llmc_rt_internal.h"

/* ---- IO bindings ------------------------------------------------------- */

static bool role_is_input(int role)
{
    return role <= ROLE_PAST_VALUE;
}

static llmc_rt_status verify_binding(fb_reader *r, const llmc_rt_plan *p, const rt_io_desc *io,
                                     int is_output, llmc_rt_error *err)
{
    if (io->tensor >= rt_plan_of(p)->n_tensors)
        return rt_fail(err, LLMC_RT_E_CORRUPT, "tensor %u >= %u tensors",
                       RT_N(io->tensor, rt_plan_of(p)->n_tensors), NULL);
    if (io->role < 0 || io->role >= ROLE_COUNT ||
        (io->role != ROLE_GENERIC && role_is_input(io->role) == (is_output != 0)))
        return rt_fail(err, LLMC_RT_E_CORRUPT, "role %d is not an %s role",
                       RT_N(io->role), RT_S(is_output ? "output" : "input"));
    tensor_meta m = rt_meta_of(r, p, io->tensor);
    if (!is_output && m.kind != KIND_ARENA)
        return rt_fail(err, LLMC_RT_E_CORRUPT, "input tensor %u is a weight",
                       RT_N(io->tensor), NULL);
    if (io->role != ROLE_GENERIC &&
        (m.dtype != role_dtype(io->role) || m.rank != role_rank(io->role)))
        return rt_fail(err, LLMC_RT_E_CORRUPT, "role %d needs dtype %d rank %d; tensor %u "
                       "has dtype %d rank %d",
                       RT_N(io->role, role_dtype(io->role), role_rank(io->role), io->tensor,
                            m.dtype, m.rank), NULL);
    if (role_is_kv(io->role) && (io->layer < 0 || (uint32_t)io->layer >= rt_plan_of(p)->n_layers))
        return rt_fail(err, LLMC_RT_E_CORRUPT, "layer %d outside [0, n_layers %u)",
                       RT_N(io->layer, rt_plan_of(p)->n_layers), NULL);
    return LLMC_RT_OK;
}

static llmc_rt_status verify_io(fb_reader *r, const llmc_rt_plan *p, int is_output,
                                llmc_rt_error *err)
{
    uint32_t n = is_output ? rt_plan_of(p)->n_outputs : rt_plan_of(p)->n_inputs;
    for (uint32_t i = 0; i < n; i++) {
        rt_io_desc io;
        llmc_rt_status st = rt_read_io(r, p, is_output, i, &io, err);
        if (st)
            return st;
        st = verify_binding(r, p, &io, is_output, err);
        if (st)
            return rt_prefix(err, st, "%s %u: ", RT_N(i), RT_S(is_output ? "output" : "input"));
    }
    return LLMC_RT_OK;
}

static llmc_rt_status verify_passes(fb_reader *r, const llmc_rt_plan *p, llmc_rt_error *err)
{
    fb_vector v = {rt_plan_of(p)->passes, rt_plan_of(p)->n_passes};
    for (uint32_t i = 0; i < rt_plan_of(p)->n_passes; i++) {
        static const fb_scalar_spec fields[2] = {{PASS_NODES, 4, 0, 0, 8},
                                                        {PASS_DIGEST, 8, 0, 8, 8}};
        fb_table t;
        const char *name;
        uint64_t values[2];
        llmc_rt_status st = fb_vec_table(r, v, i, "PassRecord", &t, err);
        if (!st)
            st = fb_string_field(r, &t, PASS_NAME, &name, err);
        if (!st)
            st = fb_scalars(r, &t, fields, 2, values, err);
        if (st)
            return rt_prefix(err, st, "pass %u: ", RT_N(i), NULL);
    }
    return LLMC_RT_OK;
}

/* ---- segments ---------------------------------------------------------- */

static llmc_rt_status verify_segment_place(const fb_reader *r, const rt_segment_desc *s,
                                           uint64_t fb_end, llmc_rt_error *err)
{
    if (s->offset % 64)
        return rt_fail(err, LLMC_RT_E_CORRUPT, "offset %u is not 64-byte aligned",
                       RT_N((int64_t)s->offset), NULL);
    if (s->offset < fb_end)
        return rt_fail(err, LLMC_RT_E_CORRUPT, "offset %u lies inside the FlatBuffer "
                       "(which ends at byte %u)", RT_N((int64_t)s->offset, (int64_t)fb_end), NULL);
    if (s->offset > r->size || s->size > r->size - s->offset)
        return rt_fail(err, LLMC_RT_E_TRUNCATED, "bytes [%u, %u + %u) run past the end of "
                       "the plan (%u bytes)", RT_N((int64_t)s->offset, (int64_t)s->offset,
                                                   (int64_t)s->size, (int64_t)r->size), NULL);
    return LLMC_RT_OK;
}

static bool segments_overlap(const rt_segment_desc *a, const rt_segment_desc *b)
{
    return a->size && b->size && a->offset < b->offset + b->size &&
           b->offset < a->offset + a->size;
}

/* Pairwise, but linear when the segments come sorted (the usual layout). */
static llmc_rt_status verify_no_overlap(fb_reader *r, const llmc_rt_plan *p,
                                        llmc_rt_error *err)
{
    rt_segment_desc a, b;
    uint64_t prev_end = 0;
    bool sorted = true;
    for (uint32_t i = 0; i < rt_plan_of(p)->n_segments && sorted; i++) {
        rt_read_segment(r, p, i, &a, NULL); /* read before: cannot fail */
        sorted = !a.size || a.offset >= prev_end;
        if (a.size)
            prev_end = a.offset + a.size;
    }
    for (uint32_t i = 0; i < rt_plan_of(p)->n_segments && !sorted; i++) {
        rt_read_segment(r, p, i, &a, NULL);
        for (uint32_t j = i + 1; j < rt_plan_of(p)->n_segments; j++) {
            rt_read_segment(r, p, j, &b, NULL);
            if (segments_overlap(&a, &b))
                return rt_fail(err, LLMC_RT_E_CORRUPT, "segments %u and %u overlap",
                               RT_N(i, j), NULL);
        }
    }
    return LLMC_RT_OK;
}

static llmc_rt_status verify_segments(fb_reader *r, const llmc_rt_plan *p, unsigned flags,
                                      llmc_rt_error *err)
{
    uint64_t fb_end = r->end; /* every table, vector and string is verified by now */
    for (uint32_t i = 0; i < rt_plan_of(p)->n_segments; i++) {
        rt_segment_desc s;
        llmc_rt_status st = rt_read_segment(r, p, i, &s, err);
        if (!st)
            st = verify_segment_place(r, &s, fb_end, err);
        if (st)
            return rt_prefix(err, st, "segment %u: ", RT_N(i), NULL);
    }
    /* Placement before hashes: a misplaced segment is reported as such,
     * not as the hash mismatch that reading the wrong bytes gives. */
    llmc_rt_status st = verify_no_overlap(r, p, err);
    for (uint32_t i = 0; !st && (flags & LLMC_RT_VERIFY_HASHES) && i < rt_plan_of(p)->n_segments; i++) {
        rt_segment_desc s;
        rt_read_segment(r, p, i, &s, NULL); /* read above: cannot fail */
        if (llmc_rt_xxh64(r->base + s.offset, (size_t)s.size, 0) != s.xxhash64)
            st = rt_prefix(err, rt_fail(err, LLMC_RT_E_HASH, "xxhash64 of %u bytes at %u does not match",
                                        RT_N((int64_t)s.size, (int64_t)s.offset), NULL),
                           "segment %u: ", RT_N(i), NULL);
    }
    return st;
}

/* ---- KV store ---------------------------------------------------------- */

static llmc_rt_status compute_kv_bytes(fb_reader *r, llmc_rt_plan *p, llmc_rt_error *err)
{
    rt_plan_of(p)->kv_bytes = 0;
    for (uint32_t i = 0; i < rt_plan_of(p)->n_inputs; i++) {
        rt_io_desc io;
        rt_tensor_desc d;
        int64_t dims[LLMC_RT_MAX_RANK];
        uint64_t bytes;
        llmc_rt_status st = rt_read_io(r, p, 0, i, &io, err);
        if (st)
            return st;
        if (io.role != ROLE_PAST_KEY && io.role != ROLE_PAST_VALUE)
            continue;
        st = rt_read_tensor(r, p, io.tensor, &d, err);
        if (!st)
            st = rt_eval_dims(r, &d, 0, rt_plan_of(p)->max_context, dims, &bytes, LLMC_RT_E_CORRUPT, err);
        if (!st && rt_qalign64(bytes) < bytes)
            st = rt_fail(err, LLMC_RT_E_CORRUPT, "size overflows", NULL, NULL);
        if (!st && rt_plan_of(p)->kv_bytes + rt_qalign64(bytes) < rt_plan_of(p)->kv_bytes)
            st = rt_fail(err, LLMC_RT_E_CORRUPT, "KV store size overflows", NULL, NULL);
        if (st)
            return rt_prefix(err, st, "input %u (KV store at P=max_context): ", RT_N(i), NULL);
        rt_plan_of(p)->kv_bytes += rt_qalign64(bytes);
    }
    return LLMC_RT_OK;
}

/* ---- tokenizer --------------------------------------------------------- */

/* Plan.tokenizer: its segment (placed by verify_segments) and every table
 * inside it (llmc_rt_tokenizer_open). */
static llmc_rt_status verify_tokenizer(fb_reader *r, llmc_rt_plan *p, llmc_rt_error *err)
{
    fb_table root, t;
    uint64_t segment = 0;
    rt_segment_desc s;
    llmc_rt_tokenizer tok;
    rt_plan_of(p)->tokenizer_segment = UINT32_MAX;
    llmc_rt_status st = fb_table_at(r, rt_plan_of(p)->root, "Plan", &root, err);
    if (!st)
        st = fb_table_field(r, &root, PLAN_TOKENIZER, "Tokenizer", &t, err);
    if (st || !t.pos)
        return st;
    st = fb_scalar(r, &t, TOKENIZER_SEGMENT, 4, 0, &segment, err);
    if (!st)
        st = rt_read_segment(r, p, (uint32_t)(segment < rt_plan_of(p)->n_segments ? segment : rt_plan_of(p)->n_segments), &s, err);
    if (!st && (s.offset > SIZE_MAX || s.size > SIZE_MAX))
        st = rt_fail(err, LLMC_RT_E_CORRUPT, "segment too large", NULL, NULL);
    if (!st)
        st = llmc_rt_tokenizer_open(&tok, r->base + s.offset, (size_t)s.size, err);
    if (st)
        return rt_prefix(err, st, "tokenizer: ", NULL, NULL);
    rt_plan_of(p)->tokenizer_segment = (uint32_t)segment;
    return LLMC_RT_OK;
}

llmc_rt_status rt_verify_after_ops(fb_reader *r, llmc_rt_plan *p, unsigned flags,
                                   llmc_rt_error *err)
{
    llmc_rt_status st = verify_io(r, p, 0, err);
    if (!st)
        st = verify_io(r, p, 1, err);
    if (!st)
        st = verify_passes(r, p, err);
    if (!st)
        st = verify_segments(r, p, flags, err);
    if (!st)
        st = verify_tokenizer(r, p, err);
    return st ? st : compute_kv_bytes(r, p, err);
}
