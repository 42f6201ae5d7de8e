/* llmc tune PLAN --npu: the time of every node of a chunk (paper 003 §3.4:
 * "profiles all the subgraph execution time ... offline") measured with
 * the delegate, written into the plan's npu_costs in place; the out-of-
 * order schedule weighs them (Eq. 6) instead of its multiply-add estimate.
 * One lane, in order, so that no two nodes overlap while they are timed;
 * medians over every chunk of R prefills (after one to warm up). */
#include "tune_npu.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu_prefill.h"
#include "support/out_file.h"
#include "plan_format.h"

/* ns[0, nodes) over the plan's npu_costs, into a copy written atomically. */
static int write_costs(const char *path, const llmc_rt_plan *plan, const uint64_t *ns,
                       uint32_t nodes, llmc_error *err)
{
    fb_reader r = rt_reader(plan);
    rt_npu_desc npu;
    if (rt_read_npu(&r, plan, &npu, NULL) || npu.costs.len != nodes)
        return llmc_fail(err, LLMC_E_INPUT, "'%s' has no npu_costs of %u nodes to rewrite; "
                         "recompile it with this llmc", path, nodes);
    uint8_t *copy = malloc(rt_plan_of(plan)->size);
    if (!copy)
        return llmc_fail(err, LLMC_E_NOMEM, "out of memory copying the plan");
    memcpy(copy, rt_plan_of(plan)->base, rt_plan_of(plan)->size);
    for (uint32_t j = 0; j < nodes; j++)
        for (int b = 0; b < 8; b++)
            copy[npu.costs.pos + 8u * j + (uint32_t)b] = (uint8_t)(ns[j] >> (8 * b));
    llmc_output out = {0};
    int rc = llmc_out_create(path, &out, err) ? LLMC_OK : err->code;
    if (!rc && fwrite(copy, 1, rt_plan_of(plan)->size, out.file) != rt_plan_of(plan)->size)
        rc = llmc_fail(err, LLMC_E_OUTPUT, "'%s': %s", path, strerror(errno));
    rc = llmc_out_finish(&out, rc, err);
    free(copy);
    return rc;
}

static int time_nodes(llmc_npu *npu, const llmc_rt_plan *plan, uint32_t rows, uint32_t repeats,
                      llmc_rt_session *s, uint64_t *ns, llmc_error *err)
{
    int64_t *tokens = malloc(sizeof *tokens * rows);
    int rc = tokens ? LLMC_OK : llmc_fail(err, LLMC_E_NOMEM, "out of memory");
    for (uint32_t i = 0; !rc && i < rows; i++)
        tokens[i] = (int64_t)((i * 7919u + 13u) % (rt_plan_of(plan)->vocab_size ? rt_plan_of(plan)->vocab_size : 1));
    for (uint32_t k = 0; !rc && k <= repeats; k++) { /* the first warms caches up */
        llmc_rt_session_reset(s);
        rc = llmc_npu_prefill(npu, tokens, rows, NULL, err);
        if (!rc && k == 0) /* forget the warm-up: a fresh recorder */
            rc = llmc_npu_forget(npu);
    }
    if (!rc && llmc_npu_node_medians(npu, ns))
        rc = llmc_fail(err, LLMC_E_NOMEM, "out of memory");
    free(tokens);
    return rc;
}

int llmc_tune_npu(const char *path, const llmc_rt_plan *plan, const llmc_tune_npu_options *o,
                  llmc_error *err)
{
    uint32_t rows = o->rows < rt_plan_of(plan)->max_context ? o->rows : rt_plan_of(plan)->max_context;
    size_t size = llmc_rt_session_memory_for(plan, rows);
    void *mem = malloc(size);
    llmc_rt_session s;
    llmc_rt_error rt = {0};
    llmc_npu *npu = NULL;
    llmc_npu_options no = {o->delegate, 1, true, NULL};
    uint64_t *ns = NULL;
    int rc = mem ? LLMC_OK : llmc_fail(err, LLMC_E_NOMEM, "out of memory for the session");
    if (!rc && llmc_rt_session_init_for(&s, plan, rows, mem, size, &rt) != LLMC_RT_OK)
        rc = llmc_fail(err, LLMC_E_RUNTIME, "'%s': %s", path, rt.msg);
    if (!rc)
        rc = llmc_npu_start(&npu, &s, &no, err);
    if (!rc && !(ns = calloc(llmc_npu_nodes(npu), sizeof *ns)))
        rc = llmc_fail(err, LLMC_E_NOMEM, "out of memory");
    if (!rc)
        rc = time_nodes(npu, plan, rows, o->repeats, &s, ns, err);
    for (uint32_t j = 0; !rc && j < llmc_npu_nodes(npu); j++) {
        llmc_rt_chunk_event e;
        llmc_rt_chunked_node(llmc_npu_chunked(npu), j, &e);
        printf("node %2u %-8s ops %3u..%-3u %12.3f ms\n", j, e.lane ? "delegate" : "cpu",
               e.first_op, e.first_op + e.n_ops - 1, (double)ns[j] / 1e6);
    }
    uint32_t nodes = npu ? llmc_npu_nodes(npu) : 0;
    int stop_rc = llmc_npu_stop(npu, err);
    rc = rc ? rc : stop_rc;
    if (!rc)
        rc = write_costs(path, plan, ns, nodes, err);
    if (!rc)
        printf("npu_costs of %u nodes (median ns of %u prefills of %u tokens) written to %s\n",
               nodes, o->repeats, rows, path);
    free(ns);
    free(mem);
    return rc;
}
