/* The exporter delegate of the NPU export (npu_exporter.h). */
#include "npu_exporter.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "support/out_file.h"
#include "npu_export_ops.h"

/* Reference inputs: about N(0, 1) (twelve uniforms summed, minus 6, exact
 * arithmetic: the same values on every machine), times INPUT_SCALE. */
#define INPUT_SCALE 2.0
#define INPUT_SEED 0x6c6c6d632d6e7075ull /* "llmc-npu" */

/* ---- files ------------------------------------------------------------------ */

char *npx_path_join(const char *dir, const char *name, const char *suffix)
{
    size_t n = strlen(dir) + strlen(name) + strlen(suffix) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s%s", dir, name, suffix);
    return p;
}

/* dir/name+suffix holding bytes[0, size), written atomically. */
static int write_file(const char *dir, const char *name, const char *suffix, const void *bytes,
                      size_t size, llmc_error *err)
{
    char *path = npx_path_join(dir, name, suffix);
    if (!path)
        return llmc_fail(err, LLMC_E_NOMEM, "out of memory");
    llmc_output out;
    FILE *f = llmc_out_create(path, &out, err);
    int rc = f ? LLMC_OK : LLMC_E_OUTPUT;
    if (f && size && fwrite(bytes, 1, size, f) != size)
        rc = llmc_fail(err, LLMC_E_OUTPUT, "cannot write '%s': %s", path, strerror(errno));
    if (f)
        rc = llmc_out_finish(&out, rc, err);
    free(path);
    return rc;
}

/* ---- the exporter delegate ---------------------------------------------------- */

/* File names come from the plan: a name that would leave DIR is refused. */
static int check_file_name(const llmc_rt_subgraph *sg, llmc_error *err)
{
    const char *name = npx_text_of(sg->name);
    if (!*name || *name == '.' || strchr(name, '/') || strlen(name) > 200)
        return llmc_fail(err, LLMC_E_UNSUPPORTED, "--npu-export: subgraph %u: its name '%s' is "
                         "not a plain file name", sg->index, name);
    return LLMC_OK;
}

static int write_onnx(const exporter *ex, const llmc_rt_subgraph *sg, export_entry *e)
{
    onnx_graph g = {.sg = sg, .err = ex->err};
    Onnx__ModelProto model = ONNX__MODEL_PROTO__INIT;
    int rc = npx_build_model(&g, ex->plan_name, &model);
    size_t size = rc ? 0 : onnx__model_proto__get_packed_size(&model);
    uint8_t *bytes = rc ? NULL : malloc(size ? size : 1);
    if (!rc && !bytes)
        rc = llmc_fail(ex->err, LLMC_E_NOMEM, "--npu-export: no memory for %zu bytes of '%s'",
                       size, sg->name);
    if (!rc && onnx__model_proto__pack(&model, bytes) != size)
        rc = llmc_fail(ex->err, LLMC_E_INTERNAL, "--npu-export: '%s': packed size mismatch",
                       sg->name);
    if (!rc)
        rc = write_file(ex->dir, sg->name, ".onnx", bytes, size, ex->err);
    e->weight_bytes = g.weight_bytes;
    free(bytes);
    npx_arena_free(&g.mem);
    return rc;
}

/* xorshift64* (never 0). */
static uint64_t next_random(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1Dull;
}

/* About N(0, INPUT_SCALE^2): twelve 24-bit uniforms summed, minus 6. */
static void fill_inputs(uint32_t index, float *x, size_t n)
{
    uint64_t s = INPUT_SEED ^ (0x9E3779B97F4A7C15ull * (index + 1u));
    for (size_t i = 0; i < n; i++) {
        double sum = 0;
        for (int k = 0; k < 12; k++)
            sum += (double)(next_random(&s) >> 40) / (double)(1u << 24);
        x[i] = (float)(INPUT_SCALE * (sum - 6.0));
    }
}

static size_t floats_of(const llmc_rt_sg_tensor *d)
{
    size_t n = 1;
    for (int a = 0; a < d->rank; a++)
        n *= (size_t)d->dims[a];
    return n;
}

/* The reference delegate builds sg, runs it once on io and releases it. */
static int run_reference(const exporter *ex, const llmc_rt_subgraph *sg, void *const *io)
{
    llmc_rt_error rt = {0};
    void *graph = NULL;
    llmc_rt_status st = ex->ref.prepare(ex->ref.ctx, sg, &graph, &rt);
    int finished = 0;
    if (!st)
        st = ex->ref.execute(ex->ref.ctx, graph, io, &rt);
    if (!st)
        st = ex->ref.wait(ex->ref.ctx, 1, &finished, &rt);
    if (graph)
        ex->ref.release(ex->ref.ctx, graph);
    if (st || !finished)
        return llmc_fail(ex->err, LLMC_E_UNSUPPORTED, "--npu-export: subgraph %u '%s': the "
                         "reference delegate: %s", sg->index, npx_text_of(sg->name),
                         st ? rt.msg : "did not finish");
    return LLMC_OK;
}

/* <name>.inputs.bin and <name>.outputs.bin: deterministic inputs and the
 * reference delegate's outputs for them, each side's tensors concatenated
 * in order (one buffer: inputs, then outputs). */
static int write_reference(const exporter *ex, const llmc_rt_subgraph *sg)
{
    uint32_t n_io = sg->n_inputs + sg->n_outputs;
    size_t total = 0, inputs = 0;
    for (uint32_t t = 0; t < n_io; t++) {
        total += floats_of(&sg->tensors[t]);
        inputs = t + 1 == sg->n_inputs ? total : inputs;
    }
    float *buf = calloc(total + 1, sizeof *buf);
    void **io = calloc(n_io + 1u, sizeof *io);
    int rc = buf && io ? LLMC_OK : llmc_fail(ex->err, LLMC_E_NOMEM, "--npu-export: no memory "
                                             "for the reference run of '%s'", sg->name);
    for (size_t t = 0, at = 0; !rc && t < n_io; at += floats_of(&sg->tensors[t]), t++)
        io[t] = buf + at;
    if (!rc) {
        fill_inputs(sg->index, buf, inputs);
        rc = run_reference(ex, sg, io);
    }
    if (!rc)
        rc = write_file(ex->dir, sg->name, ".inputs.bin", buf, inputs * sizeof *buf, ex->err);
    if (!rc)
        rc = write_file(ex->dir, sg->name, ".outputs.bin", buf + inputs,
                        (total - inputs) * sizeof *buf, ex->err);
    free(io);
    free(buf);
    return rc;
}

static int add_entry(exporter *ex, export_entry *e)
{
    uint32_t index = e->sg->index;
    if (index >= ex->n_entries) {
        export_entry **grown = realloc(ex->entries, ((size_t)index + 1) * sizeof *grown);
        if (!grown)
            return llmc_fail(ex->err, LLMC_E_NOMEM, "out of memory");
        memset(grown + ex->n_entries, 0, (index + 1 - ex->n_entries) * sizeof *grown);
        ex->entries = grown;
        ex->n_entries = index + 1;
    }
    free(ex->entries[index]);
    ex->entries[index] = e;
    return LLMC_OK;
}

/* Every file of one subgraph; the graph handle is its entry. */
static llmc_rt_status export_prepare(void *ctx, const llmc_rt_subgraph *sg, void **graph,
                                     llmc_rt_error *rt)
{
    exporter *ex = ctx;
    *graph = NULL;
    export_entry *e = calloc(1, sizeof *e);
    int rc = e ? LLMC_OK : llmc_fail(ex->err, LLMC_E_NOMEM, "out of memory");
    if (!rc) {
        e->sg = sg;
        rc = add_entry(ex, e);
        if (rc)
            free(e);
    }
    if (!rc)
        rc = check_file_name(sg, ex->err);
    if (!rc)
        rc = npx_check_tensors(sg, ex->err);
    if (!rc)
        rc = write_reference(ex, sg);
    if (!rc)
        rc = write_onnx(ex, sg, e);
    if (rc) {
        ex->rc = rc;
        if (rt) {
            rt->code = LLMC_RT_E_DELEGATE;
            snprintf(rt->msg, sizeof rt->msg, "export of subgraph %u failed", sg->index);
        }
        return LLMC_RT_E_DELEGATE;
    }
    *graph = e;
    return LLMC_RT_OK;
}

/* The exporter builds files only: nothing runs through it. */
static llmc_rt_status export_execute(void *ctx, void *graph, void *const *io, llmc_rt_error *err)
{
    (void)ctx;
    (void)io;
    const export_entry *e = graph;
    if (err) {
        err->code = LLMC_RT_E_DELEGATE;
        snprintf(err->msg, sizeof err->msg, "subgraph '%s': the --npu-export delegate writes "
                 "models and runs none", e ? npx_text_of(e->sg->name) : "?");
    }
    return LLMC_RT_E_DELEGATE;
}

/* Nothing is ever in flight. */
static llmc_rt_status export_wait(void *ctx, int block, int *finished, llmc_rt_error *err)
{
    (void)ctx;
    (void)block;
    (void)err;
    if (finished)
        *finished = 1;
    return LLMC_RT_OK;
}

/* The files stay; the entry (owned by the exporter) is marked. */
static void export_release(void *ctx, void *graph)
{
    (void)ctx;
    export_entry *e = graph;
    if (e)
        e->released = true;
}

void npx_exporter_table(exporter *ex, llmc_rt_delegate *out)
{
    *out = (llmc_rt_delegate){ex, export_prepare, export_execute, export_wait, export_release};
}
