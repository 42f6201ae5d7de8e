/* A chunked prefill's view of the plan: Plan.subgraphs proved (ranges,
 * op codes, boundary lists, row-form shapes), described for a delegate at
 * S = C, and a chunk cut into nodes (chunked_internal.h).  Nothing here
 * runs at plan open: a plain session never reads the subgraphs. */
#include <string.h>

#include "chunked_internal.h"
#include "rt_div64.h"
#include "rt_msg.h"
#include "llmc_rt_internal.h"

static llmc_rt_status no_subgraphs(llmc_rt_error *err)
{
    return rt_fail(err, LLMC_RT_E_ARG, "the plan has no NPU subgraphs (compile it with "
                   "--npu-chunk C)", NULL, NULL);
}

/* Ops [first, first + n) inside the plan, after the previous subgraph. */
static llmc_rt_status check_range(const llmc_rt_plan *p, const rt_subgraph_desc *d, uint32_t k,
                                  uint64_t after, llmc_rt_error *err)
{
    if (d->n_ops == 0 || d->first_op < after || (uint64_t)d->first_op + d->n_ops > rt_plan_of(p)->n_ops)
        return rt_fail(err, LLMC_RT_E_CORRUPT, "subgraph %u: ops [%u, +%u) are empty, overlap "
                       "the one before or pass the plan's %u", RT_N(k, d->first_op, d->n_ops,
                       rt_plan_of(p)->n_ops), NULL);
    return LLMC_RT_OK;
}

/* Dims that never shrink as S grows and never depend on P. */
static bool grows_with_s_only(const fb_reader *r, const rt_tensor_desc *d)
{
    for (uint32_t k = 0; k < d->dims.len; k++) {
        rt_affine a = fb_affine(fb_vec_affine(r, d->dims, k));
        if (a.p != 0 || a.s < 0)
            return false;
    }
    return true;
}

/* The furthest byte an arena tensor reaches in a chunk, S <= C: its bytes
 * at S = C when its dims grow with S alone, else the end of its whole
 * reservation (so that views in a lane need no check of their own). */
static llmc_rt_status lane_end(fb_reader *r, const llmc_rt_plan *p, uint32_t t, uint32_t chunk,
                               uint64_t *end, llmc_rt_error *err)
{
    rt_tensor_desc d;
    int64_t dims[LLMC_RT_MAX_RANK];
    uint64_t bytes = 0;
    llmc_rt_status st = rt_read_tensor(r, p, t, &d, err);
    if (st || d.kind != KIND_ARENA)
        return st;
    if (grows_with_s_only(r, &d))
        st = rt_eval_dims(r, &d, chunk, 0, dims, &bytes, LLMC_RT_E_CORRUPT, err);
    else
        bytes = d.max_bytes;
    if (!st && d.arena_offset + bytes > *end)
        *end = d.arena_offset + bytes;
    return st;
}

static llmc_rt_status measure_subgraph(fb_reader *r, const llmc_rt_plan *p, const rt_npu_desc *npu,
                                       uint32_t k, uint64_t *after, rt_chunk_sizes *z,
                                       llmc_rt_error *err)
{
    rt_subgraph_desc d;
    llmc_rt_status st = rt_read_subgraph(r, npu, k, &d, err);
    if (!st)
        st = check_range(p, &d, k, *after, err);
    if (st)
        return st;
    uint64_t io = (uint64_t)d.inputs.len + d.outputs.len;
    z->max_io = io > z->max_io ? (uint32_t)io : z->max_io;
    z->tensor_entries += io;
    z->op_entries += d.n_ops;
    for (uint32_t i = d.first_op; !st && i < d.first_op + d.n_ops; i++) {
        rt_op_desc op;
        st = rt_read_op(r, p, i, &op, err);
        z->tensor_entries += (uint64_t)op.inputs.len + op.outputs.len;
    }
    *after = (uint64_t)d.first_op + d.n_ops;
    return st;
}

llmc_rt_status rt_chunk_measure(const llmc_rt_plan *p, uint32_t context, rt_chunk_sizes *z,
                                llmc_rt_error *err)
{
    fb_reader r = rt_reader(p);
    rt_npu_desc npu;
    memset(z, 0, sizeof *z);
    llmc_rt_status st = rt_read_npu(&r, p, &npu, err);
    if (st)
        return st;
    if (npu.chunk == 0 || npu.subgraphs.len == 0)
        return no_subgraphs(err);
    if (context < 1 || context > rt_plan_of(p)->max_context || npu.chunk > context)
        return rt_fail(err, LLMC_RT_E_ARG, "context %u: outside [chunk %u, max_context %u]",
                       RT_N(context, npu.chunk, rt_plan_of(p)->max_context), NULL);
    z->chunk = npu.chunk;
    z->n_subgraphs = npu.subgraphs.len;
    z->max_nodes = 2 * npu.subgraphs.len + 1;
    z->max_chunks = (context + npu.chunk - 1) / npu.chunk;
    uint64_t after = 0;
    for (uint32_t k = 0; !st && k < npu.subgraphs.len; k++)
        st = measure_subgraph(&r, p, &npu, k, &after, z, err);
    for (uint32_t t = 0; !st && t < rt_plan_of(p)->n_tensors; t++)
        st = lane_end(&r, p, t, npu.chunk, &z->lane_bytes, err);
    z->lane_bytes = (z->lane_bytes + 63) & ~(uint64_t)63;
    return st;
}

/* ---- proving a subgraph ------------------------------------------------- */

/* The op codes a subgraph may hold (llmc_rt.h), from the npu column. */
int llmc_rt_op_npu(int code)
{
#define NPU_COLUMN_(s, Name, v, in_min, in_max, out_min, out_max, npu) npu,
    static const unsigned char npu_ok[LLMC_RT_OP_COUNT] = {LLMC_PLAN_OPS(NPU_COLUMN_)};
#undef NPU_COLUMN_
    return code >= 0 && code < LLMC_RT_OP_COUNT && npu_ok[code];
}

static bool writes(const rt_prepared *pr, const rt_prep_op *op, uint32_t t)
{
    for (uint32_t k = 0; k < op->outputs.len; k++)
        if (prep_operand(pr, op->outputs, k) == t)
            return true;
    return false;
}

static bool reads(const rt_prepared *pr, const rt_prep_op *op, uint32_t t)
{
    for (uint32_t k = 0; k < op->inputs.len; k++)
        if (prep_operand(pr, op->inputs, k) == t)
            return true;
    for (uint32_t k = 0; k < op->regions.len; k++)
        if (pr->regions[op->regions.first + k].src == t)
            return true;
    return false;
}

/* Input: read before an op of [first, i) wrote it.  Output: read by an op
 * after the subgraph or a graph output. */
static bool is_input(const llmc_rt_session *s, uint32_t first, uint32_t i, uint32_t t)
{
    const rt_prepared *pr = rt_state(s)->prepared;
    if (pr->tensors[t].kind != KIND_ARENA)
        return false;
    for (uint32_t j = first; j < i; j++)
        if (writes(pr, &pr->ops[j], t))
            return false;
    return true;
}

static bool is_output(const llmc_rt_session *s, uint32_t end, uint32_t t)
{
    const rt_prepared *pr = rt_state(s)->prepared;
    for (uint32_t i = 0; i < rt_plan_of(rt_state(s)->plan)->n_outputs; i++)
        if (pr->outputs[i].tensor == t)
            return true;
    for (uint32_t j = end; j < rt_plan_of(rt_state(s)->plan)->n_ops; j++)
        if (reads(pr, &pr->ops[j], t))
            return true;
    return false;
}

/* Position of t in list[0, n), or n. */
static uint32_t find(const uint32_t *list, uint32_t n, uint32_t t)
{
    uint32_t i = 0;
    while (i < n && list[i] != t)
        i++;
    return i;
}

/* The boundary lists a subgraph must have, computed as codegen does
 * (compiler/codegen/subgraphs.c), into list (capacity cap); false when the plan's
 * `given` differs. */
static bool boundary_matches(const llmc_rt_session *s, const rt_subgraph_desc *d, bool outputs,
                             const fb_reader *r, uint32_t *list, uint32_t cap)
{
    const rt_prepared *pr = rt_state(s)->prepared;
    fb_vector given = outputs ? d->outputs : d->inputs;
    uint32_t n = 0, end = d->first_op + d->n_ops;
    for (uint32_t i = d->first_op; i < end; i++) {
        const rt_prep_op *op = &pr->ops[i];
        rt_prep_list side = outputs ? op->outputs : op->inputs;
        for (uint32_t k = 0; k < side.len; k++) {
            uint32_t t = prep_operand(pr, side, k);
            bool in = outputs ? is_output(s, end, t) : is_input(s, d->first_op, i, t);
            if (in && find(list, n, t) == n) {
                if (n == cap || n == given.len || fb_vec_u32(r, given, n) != t)
                    return false;
                list[n++] = t;
            }
        }
    }
    return n == given.len;
}

/* No dim depends on P; S only as the first dim that is not 1 (c 0, s 1). */
static bool row_form(const llmc_rt_session *s, uint32_t t)
{
    const rt_prep_tensor *d = &rt_state(s)->prepared->tensors[t];
    bool leading = true;
    for (int k = 0; k < d->rank; k++) {
        rt_affine a = rt_state(s)->prepared->affines[d->dims + k];
        if (a.p != 0 || (a.s != 0 && !(leading && a.s == 1 && a.c == 0)))
            return false;
        leading = leading && a.s == 0 && a.c == 1;
    }
    return true;
}

static llmc_rt_status refuse(const llmc_rt_subgraph *sg, const char *why, uint32_t op_or_tensor,
                             llmc_rt_error *err)
{
    return rt_fail(err, LLMC_RT_E_CORRUPT, "subgraph %u '%s': %s %u", RT_N(sg->index,
                   op_or_tensor), RT_S(sg->name, why));
}

/* ---- describing it ------------------------------------------------------ */

/* Tensor t's description at S = C (ids[] parallels the table: plan indices). */
static llmc_rt_status describe_tensor(const llmc_rt_chunked *c, uint32_t t, llmc_rt_sg_tensor *out,
                                      llmc_rt_error *err)
{
    const llmc_rt_session *s = c->s;
    const rt_prep_tensor *d = &rt_state(s)->prepared->tensors[t];
    rt_view v;
    llmc_rt_status st = rt_session_view(s, NULL, t, c->chunk, 0, &v, err);
    if (st)
        return st;
    memset(out, 0, sizeof *out);
    out->name = d->name;
    out->dtype = d->format.dtype;
    out->layout = d->format.layout;
    out->rank = v.rank;
    memcpy(out->dims, v.dims, sizeof v.dims);
    out->group = d->format.group;
    out->tile_rows = (uint32_t)d->format.tile_rows;
    out->tile_depth = (uint32_t)d->format.tile_depth;
    if (d->kind == KIND_WEIGHT) {
        fb_reader r = rt_reader(rt_state(s)->plan);
        rt_tensor_desc td;
        rt_segment_desc seg;
        st = rt_read_tensor(&r, rt_state(s)->plan, t, &td, err);
        if (!st)
            st = rt_read_segment(&r, rt_state(s)->plan, td.segment, &seg, err);
        out->weight = d->data;
        out->bytes = seg.size;
        return st;
    }
    return rt_tensor_bytes(&d->format, v.rank, v.dims, &out->bytes)
               ? LLMC_RT_OK
               : rt_fail(err, LLMC_RT_E_CORRUPT, "tensor %u: no size at S=%u", RT_N(t, c->chunk),
                         NULL);
}

/* Index of plan tensor t in the description, added when new. */
static llmc_rt_status tensor_index(const llmc_rt_chunked *c, llmc_rt_subgraph *sg,
                                   llmc_rt_sg_tensor *table, uint32_t *ids, uint32_t t,
                                   uint32_t *at, llmc_rt_error *err)
{
    *at = find(ids, sg->n_tensors, t);
    if (*at < sg->n_tensors)
        return LLMC_RT_OK;
    if (rt_state(c->s)->prepared->tensors[t].kind == KIND_ARENA && !row_form(c->s, t))
        return refuse(sg, "a tensor depends on P or has S after another dim: tensor", t, err);
    ids[sg->n_tensors] = t;
    return describe_tensor(c, t, &table[sg->n_tensors++], err);
}

static llmc_rt_status describe_op(const llmc_rt_chunked *c, llmc_rt_subgraph *sg,
                                  llmc_rt_sg_tensor *table, uint32_t *ids, uint32_t i,
                                  llmc_rt_sg_op *out, llmc_rt_error *err)
{
    const rt_prepared *pr = rt_state(c->s)->prepared;
    const rt_prep_op *op = &pr->ops[i];
    if (!llmc_rt_op_npu(op->code))
        return refuse(sg, "a subgraph cannot hold the op code of op", i, err);
    if (op->inputs.len > LLMC_RT_SG_OP_IO || op->outputs.len > LLMC_RT_SG_OP_IO)
        return refuse(sg, "too many operands for a subgraph op: op", i, err);
    memset(out, 0, sizeof *out);
    out->code = op->code;
    out->kind = op->kind;
    out->epsilon = op->epsilon;
    out->scale = op->scale;
    out->name = op->name;
    out->n_inputs = op->inputs.len;
    out->n_outputs = op->outputs.len;
    llmc_rt_status st = LLMC_RT_OK;
    for (uint32_t k = 0; !st && k < op->inputs.len; k++)
        st = tensor_index(c, sg, table, ids, prep_operand(pr, op->inputs, k), &out->inputs[k], err);
    for (uint32_t k = 0; !st && k < op->outputs.len; k++)
        st = tensor_index(c, sg, table, ids, prep_operand(pr, op->outputs, k), &out->outputs[k],
                          err);
    return st;
}

/* The boundary first (inputs, then outputs, as the plan lists them), then
 * every other operand in op order; int8 activations stay inside. */
static llmc_rt_status describe_subgraph(llmc_rt_chunked *c, const rt_subgraph_desc *d,
                                        llmc_rt_subgraph *sg, llmc_rt_sg_tensor *table,
                                        uint32_t *ids, llmc_rt_sg_op *ops, llmc_rt_error *err)
{
    fb_reader r = rt_reader(rt_state(c->s)->plan);
    uint32_t room = d->inputs.len + d->outputs.len;
    if (!boundary_matches(c->s, d, false, &r, ids, room) ||
        !boundary_matches(c->s, d, true, &r, ids + d->inputs.len, room - d->inputs.len))
        return refuse(sg, "its input or output list is not what its ops read and write; "
                      "first op", d->first_op, err);
    llmc_rt_status st = LLMC_RT_OK;
    sg->n_inputs = d->inputs.len;
    sg->n_outputs = d->outputs.len;
    for (uint32_t k = 0; !st && k < room; k++) {
        if (rt_state(c->s)->prepared->tensors[ids[k]].format.layout == LLMC_RT_LAYOUT_QActTiles)
            return refuse(sg, "int8 activations cross its boundary: tensor", ids[k], err);
        if (!row_form(c->s, ids[k]))
            return refuse(sg, "a tensor depends on P or has S after another dim: tensor", ids[k],
                          err);
        st = describe_tensor(c, ids[k], &table[k], err);
    }
    sg->n_tensors = room;
    sg->tensors = table;
    sg->ops = ops;
    for (uint32_t i = 0; !st && i < d->n_ops; i++)
        st = describe_op(c, sg, table, ids, d->first_op + i, &ops[i], err);
    sg->n_ops = d->n_ops;
    return st;
}

/* ---- nodes and their costs ---------------------------------------------- */

/* a * b capped at RT_CHUNK_COST_CAP (costs only compare). */
static uint64_t cost_mul(uint64_t a, uint64_t b)
{
    return b && a > rt_udiv64(RT_CHUNK_COST_CAP, b) ? RT_CHUNK_COST_CAP : a * b;
}

/* Multiply-adds (or elements) of op i at S = C: Eq. 6's T, relative. */
static uint64_t op_cost(const llmc_rt_chunked *c, uint32_t i)
{
    const rt_prepared *pr = rt_state(c->s)->prepared;
    const rt_prep_op *op = &pr->ops[i];
    uint64_t rows = c->chunk;
    rt_view v;
    if (op->code == LLMC_RT_OP_Linear || op->code == LLMC_RT_OP_ShadowLinear) {
        if (op->inputs.len < 2 || rt_session_view(c->s, NULL, prep_operand(pr, op->inputs, 1),
                                                  c->chunk, 0, &v, NULL))
            return rows;
        /* a shadow touches a few columns of W per row */
        uint64_t n = (uint64_t)v.dims[0], k = op->code == LLMC_RT_OP_Linear ? (uint64_t)v.dims[1] : 1;
        return cost_mul(cost_mul(rows, n), k);
    }
    if (op->code == LLMC_RT_OP_Attention) /* q.k and p.v over ~C positions per head */
        return cost_mul(cost_mul(2 * rows, rows), (uint64_t)op->heads * (uint64_t)op->head_dim);
    if (op->outputs.len == 0 ||
        rt_session_view(c->s, NULL, prep_operand(pr, op->outputs, 0), c->chunk, 0, &v, NULL))
        return rows;
    return (uint64_t)k_count(&v);
}

static void add_node(llmc_rt_chunked *c, uint32_t first, uint32_t end, uint32_t subgraph)
{
    rt_chunk_node *n = &c->nodes[c->n_nodes++];
    n->first_op = first;
    n->n_ops = end - first;
    n->subgraph = subgraph;
    n->attention = false;
    n->cost = 0;
    for (uint32_t i = first; i < end; i++) {
        n->attention = n->attention || rt_state(c->s)->prepared->ops[i].code == LLMC_RT_OP_Attention;
        n->cost += op_cost(c, i); /* both <= the cap: no wrap */
        n->cost = n->cost > RT_CHUNK_COST_CAP ? RT_CHUNK_COST_CAP : n->cost;
    }
    if (n->attention)
        c->body_nodes = c->n_nodes;
}

/* Subgraph nodes and the CPU runs between them, in plan order. */
static void cut_nodes(llmc_rt_chunked *c, const rt_subgraph_desc *d)
{
    uint32_t at = 0;
    c->n_nodes = 0;
    c->body_nodes = 0;
    for (uint32_t k = 0; k < c->n_subgraphs; k++) {
        if (d[k].first_op > at)
            add_node(c, at, d[k].first_op, NO_SUBGRAPH);
        add_node(c, d[k].first_op, d[k].first_op + d[k].n_ops, k);
        at = d[k].first_op + d[k].n_ops;
    }
    if (at < rt_plan_of(rt_state(c->s)->plan)->n_ops)
        add_node(c, at, rt_plan_of(rt_state(c->s)->plan)->n_ops, NO_SUBGRAPH);
    if (c->body_nodes == 0)
        c->body_nodes = c->n_nodes;
}

llmc_rt_status rt_chunk_describe(llmc_rt_chunked *c, const rt_chunk_sizes *z,
                                 llmc_rt_sg_tensor *tensors, uint32_t *ids, llmc_rt_sg_op *ops,
                                 rt_subgraph_desc *descs, llmc_rt_error *err)
{
    fb_reader r = rt_reader(rt_state(c->s)->plan);
    rt_npu_desc npu;
    llmc_rt_status st = rt_read_npu(&r, rt_state(c->s)->plan, &npu, err);
    uint64_t used_tensors = 0, used_ops = 0;
    for (uint32_t k = 0; !st && k < c->n_subgraphs; k++) {
        llmc_rt_subgraph *sg = &c->subgraphs[k];
        st = rt_read_subgraph(&r, &npu, k, &descs[k], err);
        if (st)
            break;
        memset(sg, 0, sizeof *sg);
        sg->index = k;
        sg->name = descs[k].name;
        sg->rows = c->chunk;
        /* measure proved the ranges and bounded the entries */
        st = describe_subgraph(c, &descs[k], sg, tensors + used_tensors, ids + used_tensors,
                               ops + used_ops, err);
        used_tensors += sg->n_tensors;
        used_ops += sg->n_ops;
    }
    if (!st && (used_tensors > z->tensor_entries || used_ops > z->op_entries))
        st = rt_fail(err, LLMC_RT_E_CORRUPT, "subgraph descriptions overflow their bounds",
                     NULL, NULL);
    if (!st)
        cut_nodes(c, descs);
    for (uint32_t j = 0; !st && npu.costs.len == c->n_nodes && j < c->n_nodes; j++) {
        uint64_t ns = fb_u64(r.base + npu.costs.pos + 8u * j); /* llmc tune --npu */
        if (ns)
            c->nodes[j].cost = ns < RT_CHUNK_COST_CAP ? ns : RT_CHUNK_COST_CAP;
    }
    return st;
}
