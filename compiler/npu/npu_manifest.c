/* The manifest of the NPU export (npu_manifest.h). */
#include "npu_manifest.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "support/out_file.h"
#include "llmc_rt_internal.h"
#include "npu_export_ops.h"

/* ---- the manifest ----------------------------------------------------------------- */

/* s then suffix as one JSON string. */
static void json_string_with(FILE *f, const char *s, const char *suffix)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)npx_text_of(s); *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fprintf(f, "%s\"", suffix);
}

static void json_string(FILE *f, const char *s)
{
    json_string_with(f, s, "");
}

static void json_tensors(FILE *f, const llmc_rt_subgraph *sg, uint32_t first, uint32_t n)
{
    fputc('[', f);
    for (uint32_t i = 0; i < n; i++) {
        const llmc_rt_sg_tensor *d = &sg->tensors[first + i];
        fprintf(f, "%s\n        {\"name\": ", i ? "," : "");
        json_string(f, d->name);
        fprintf(f, ", \"dtype\": \"float32\", \"dims\": [");
        for (int a = 0; a < d->rank; a++)
            fprintf(f, "%s%lld", a ? ", " : "", (long long)d->dims[a]);
        fprintf(f, "]}");
    }
    fprintf(f, "\n      ]");
}

/* The chunked prefill's node of subgraph k (its plan ops). */
static llmc_rt_chunk_event subgraph_node(const llmc_rt_chunked *c, uint32_t k)
{
    llmc_rt_chunk_event e = {0};
    for (uint32_t j = 0; j < llmc_rt_chunked_nodes(c); j++)
        if (llmc_rt_chunked_node(c, j, &e) == LLMC_RT_OK && e.lane == 1 && e.subgraph == k)
            return e;
    memset(&e, 0, sizeof e);
    return e;
}

static void json_subgraph(FILE *f, const exporter *ex, const llmc_rt_chunked *c, uint32_t k)
{
    const export_entry *e = ex->entries[k];
    const char *name = e->sg->name;
    llmc_rt_chunk_event node = subgraph_node(c, k);
    fprintf(f, "%s\n    {\n      \"name\": ", k ? "," : "");
    json_string(f, name);
    fprintf(f, ",\n      \"index\": %u,\n      \"file\": ", k);
    json_string_with(f, name, ".onnx");
    fprintf(f, ",\n      \"first_op\": %u,\n      \"n_ops\": %u,\n      \"rows\": %u,\n"
               "      \"inputs\": ", node.first_op, node.n_ops, e->sg->rows);
    json_tensors(f, e->sg, 0, e->sg->n_inputs);
    fprintf(f, ",\n      \"outputs\": ");
    json_tensors(f, e->sg, e->sg->n_inputs, e->sg->n_outputs);
    fprintf(f, ",\n      \"weights_bytes\": %llu,\n      \"check\": {\"inputs\": ",
            (unsigned long long)e->weight_bytes);
    json_string_with(f, name, ".inputs.bin");
    fprintf(f, ", \"outputs\": ");
    json_string_with(f, name, ".outputs.bin");
    fprintf(f, "}\n    }");
}

static bool is_attention(const llmc_rt_plan *plan, uint32_t op)
{
    llmc_rt_op_info info;
    return llmc_rt_plan_op(plan, op, &info) == LLMC_RT_OK && info.code == LLMC_RT_OP_Attention;
}

/* Nodes every chunk runs: up to the last one holding an Attention op (the
 * rest computes the logits, in the last chunk only). */
static uint32_t body_nodes(const llmc_rt_chunked *c, const llmc_rt_plan *plan)
{
    uint32_t body = 0, n = llmc_rt_chunked_nodes(c);
    for (uint32_t j = 0; j < n; j++) {
        llmc_rt_chunk_event e;
        for (uint32_t i = 0; llmc_rt_chunked_node(c, j, &e) == LLMC_RT_OK && i < e.n_ops; i++)
            body = is_attention(plan, e.first_op + i) ? j + 1 : body;
    }
    return body ? body : n;
}

static void json_node(FILE *f, const exporter *ex, const llmc_rt_plan *plan,
                      const llmc_rt_chunk_event *e, bool last_only)
{
    bool attention = false;
    for (uint32_t i = 0; i < e->n_ops; i++)
        attention = attention || is_attention(plan, e->first_op + i);
    if (e->lane == 1) {
        fprintf(f, "{\"lane\": \"npu\", \"subgraph\": ");
        json_string(f, e->subgraph < ex->n_entries ? ex->entries[e->subgraph]->sg->name : "?");
        fprintf(f, ", \"ops\": [%u, %u]", e->first_op, e->n_ops);
    } else {
        fprintf(f, "{\"lane\": \"cpu\", \"ops\": [%u, %u], \"op_names\": [", e->first_op, e->n_ops);
        for (uint32_t i = 0; i < e->n_ops; i++) {
            llmc_rt_op_info info = {0};
            llmc_rt_plan_op(plan, e->first_op + i, &info);
            fprintf(f, "%s", i ? ", " : "");
            json_string(f, info.name);
        }
        fprintf(f, "]");
    }
    fprintf(f, "%s%s}", attention ? ", \"attention\": true" : "",
            last_only ? ", \"last_chunk_only\": true" : "");
}

static void json_schedule(FILE *f, const exporter *ex, const llmc_rt_chunked *c,
                          const llmc_rt_plan *plan, uint32_t chunk)
{
    uint32_t n = llmc_rt_chunked_nodes(c), body = body_nodes(c, plan);
    fprintf(f, "  \"schedule\": {\n    \"description\": \"A prompt of n tokens runs in ceil(n / "
               "%u) chunks of %u rows, in order; the last chunk is padded to %u rows with zero "
               "rows after its real ones. Each chunk runs the nodes below in this order: an npu "
               "node runs its subgraph's model on the chunk's rows (its inputs written by the "
               "nodes before it, its outputs read by the nodes after it), a cpu node runs the "
               "plan ops [first, first + count) on the CPU. A node waits for the node before it "
               "in its chunk; a node holding an Attention op (attention: true) also waits for "
               "the same node of the previous chunk, whose KV cache rows it reads. The nodes "
               "after the last one holding Attention compute only the logits: they run in the "
               "last chunk only (last_chunk_only: true), so every other chunk runs the first "
               "nodes_per_chunk nodes. Each subgraph is built once for %u rows and shared by "
               "every chunk.\",\n    \"nodes_per_chunk\": %u,\n    \"nodes_last_chunk\": %u,\n"
               "    \"nodes\": [", chunk, chunk, chunk, chunk, body, n);
    for (uint32_t j = 0; j < n; j++) {
        llmc_rt_chunk_event e;
        if (llmc_rt_chunked_node(c, j, &e) != LLMC_RT_OK)
            continue;
        fprintf(f, "%s\n      ", j ? "," : "");
        json_node(f, ex, plan, &e, j >= body);
    }
    fprintf(f, "\n    ]\n  }\n");
}

int npx_write_manifest(const exporter *ex, const llmc_rt_chunked *c, const llmc_rt_plan *plan,
                       uint32_t chunk)
{
    char *path = npx_path_join(ex->dir, MANIFEST_FILE, "");
    if (!path)
        return llmc_fail(ex->err, LLMC_E_NOMEM, "out of memory");
    llmc_output out;
    FILE *f = llmc_out_create(path, &out, ex->err);
    int rc = f ? LLMC_OK : LLMC_E_OUTPUT;
    if (f) {
        fprintf(f, "{\n  \"format\": \"llmc npu export 1\",\n  \"plan\": ");
        json_string(f, ex->plan_name);
        fprintf(f, ",\n  \"chunk\": %u,\n  \"onnx\": {\"ir_version\": %d, \"opset\": %d, "
                   "\"form\": \"QDQ: Clip and QuantizeLinear (activations, one scale per "
                   "tensor), DequantizeLinear (int8 weights [K, N], one scale per output "
                   "channel, axis 1) around each MatMul\"},\n  \"subgraphs\": [",
                chunk, ONNX_IR_VERSION, ONNX_OPSET);
        for (uint32_t k = 0; k < ex->n_entries; k++)
            json_subgraph(f, ex, c, k);
        fprintf(f, "\n  ],\n");
        json_schedule(f, ex, c, plan, chunk);
        fprintf(f, "}\n");
        if (ferror(f))
            rc = llmc_fail(ex->err, LLMC_E_OUTPUT, "cannot write '%s': %s", path, strerror(errno));
        rc = llmc_out_finish(&out, rc, ex->err);
    }
    free(path);
    return rc;
}
