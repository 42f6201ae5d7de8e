/* llmc compile --npu-export DIR (npu_export.h): the entry point.  The
 * parts, one file each:
 *   - npu_onnx.c, the ONNX graph builder over protobuf-c's generated
 *     structs;
 *   - npu_export_ops.c, the op exporters: each plan op of a subgraph as ONNX
 *     nodes in QDQ form, and a subgraph's model;
 *   - npu_exporter.c, the exporter delegate the runtime's chunked prefill
 *     prepares every subgraph through, which writes its files;
 *   - npu_manifest.c, the manifest. */
#include "npu_export.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/file_map.h"
#include "support/out_file.h"
#include "llmc_ref_delegate.h"
#include "npu_manifest.h"
#include "llmc_rt_internal.h"

/* ---- the entry point ---------------------------------------------------------- */

typedef struct {
    llmc_mapped_file file;
    llmc_rt_plan plan;
    llmc_rt_session session;
    void *session_memory, *chunked_memory;
    llmc_rt_chunked *chunked;
    llmc_ref_delegate *ref;
    exporter ex;
} export_run;

/* The plan mapped and opened, a session of its max_context on it (the
 * chunk C comes with the subgraphs' descriptions: llmc_rt_subgraph.rows). */
static int open_session(export_run *r, const char *plan_path, llmc_error *err)
{
    llmc_rt_error rt = {0};
    int rc = llmc_open_input(plan_path, false, &r->file, err);
    if (!rc && llmc_rt_plan_open(&r->plan, r->file.map, r->file.size, 0, &rt) != LLMC_RT_OK)
        rc = llmc_fail(err, LLMC_E_RUNTIME, "--npu-export: '%s': %s (the export reads the plan "
                       "through this machine's runtime)", plan_path, rt.msg);
    if (!rc && llmc_rt_chunked_memory(&r->plan, rt_plan_of(&r->plan)->max_context, 1) == SIZE_MAX)
        rc = llmc_fail(err, LLMC_E_INPUT, "--npu-export: '%s' has no NPU subgraphs (compile "
                       "it with --npu-chunk C)", plan_path);
    size_t size = rc ? 0 : llmc_rt_session_memory(&r->plan);
    if (!rc && !(r->session_memory = aligned_alloc(64, (size + 63) / 64 * 64)))
        rc = llmc_fail(err, LLMC_E_NOMEM, "--npu-export: no memory for a session of %u "
                       "positions", rt_plan_of(&r->plan)->max_context);
    if (!rc && llmc_rt_session_init(&r->session, &r->plan, r->session_memory, size, &rt) !=
                   LLMC_RT_OK)
        rc = llmc_fail(err, LLMC_E_RUNTIME, "--npu-export: '%s': %s", plan_path, rt.msg);
    return rc;
}

/* Every subgraph prepared through the exporter, then the manifest. */
static int export_all(export_run *r, llmc_error *err)
{
    llmc_rt_delegate table;
    npx_exporter_table(&r->ex, &table);
    llmc_rt_error rt = {0};
    size_t size = llmc_rt_chunked_memory(&r->plan, rt_plan_of(&r->plan)->max_context, 1);
    int rc = LLMC_OK;
    if (size == SIZE_MAX || !(r->chunked_memory = malloc(size)))
        rc = llmc_fail(err, LLMC_E_NOMEM, "--npu-export: no memory for the chunked prefill");
    else if (!(r->ref = llmc_ref_delegate_create()))
        rc = llmc_fail(err, LLMC_E_NOMEM, "--npu-export: cannot start the reference delegate");
    if (!rc) {
        llmc_ref_delegate_table(r->ref, &r->ex.ref);
        if (llmc_rt_chunked_init(&r->chunked, &r->session, &table, 1, r->chunked_memory, size,
                                 &rt) != LLMC_RT_OK)
            rc = r->ex.rc ? r->ex.rc
                          : llmc_fail(err, LLMC_E_RUNTIME, "--npu-export: chunked prefill: %s",
                                      rt.msg);
    }
    for (uint32_t k = 0; !rc && k < r->ex.n_entries; k++)
        if (!r->ex.entries[k])
            rc = llmc_fail(err, LLMC_E_INTERNAL, "--npu-export: subgraph %u was not prepared", k);
    if (!rc)
        rc = npx_write_manifest(&r->ex, r->chunked, &r->plan, r->ex.entries[0]->sg->rows);
    llmc_rt_chunked_release(r->chunked);
    return rc;
}

static void close_run(export_run *r)
{
    llmc_ref_delegate_destroy(r->ref);
    for (uint32_t k = 0; k < r->ex.n_entries; k++)
        free(r->ex.entries[k]);
    free(r->ex.entries);
    free(r->chunked_memory);
    free(r->session_memory);
    llmc_unmap_file(&r->file);
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

int llmc_npu_export(const char *plan_path, const char *dir, uint32_t *n_subgraphs,
                    llmc_error *err)
{
    export_run r;
    memset(&r, 0, sizeof r);
    llmc_out_dir out = {0};
    r.ex.plan_name = base_name(plan_path);
    r.ex.err = err;
    int rc = open_session(&r, plan_path, err);
    if (!rc)
        rc = llmc_out_dir_create(dir, &out, err);
    r.ex.dir = out.tmp;
    if (!rc)
        rc = export_all(&r, err);
    /* the manifest, which names the set, replaced last in an existing DIR */
    rc = llmc_out_dir_finish(&out, MANIFEST_FILE, rc, err);
    if (!rc && n_subgraphs)
        *n_subgraphs = r.ex.n_entries;
    close_run(&r);
    return rc;
}
