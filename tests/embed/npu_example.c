/* The NPU delegate interface end to end (README, "NPU chunk subgraphs"):
 * a delegate whose functions are where an NPU driver builds, runs and
 * frees its graphs.  This one hands each call to the reference delegate
 * (runtime/platform/llmc_ref_delegate.h) and counts them; the prompt is
 * prefilled in chunks through it, then decoded greedily on the CPU.
 *
 *   npu_example PLAN ID,ID,... N    prints N greedy ids, as `llmc run
 *                                   --delegate ref --max-new N` does
 * Build: cc -std=c11 -Iruntime -Iruntime/platform npu_example.c
 *        libllmcrt_threads.a libllmcrt.a -lm -pthread */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llmc_ref_delegate.h"
#include "llmc_rt.h"

#define MAX_PROMPT 4096

typedef struct {
    llmc_rt_delegate inner;   /* the reference delegate: stands in for the NPU */
    unsigned prepared, executed;
} my_npu;

/* Build subgraph sg for sg->rows token rows, once: a driver translates its
 * ops (sg->ops, operands index sg->tensors: inputs first, then outputs,
 * then intermediates and weights, whose bytes `weight` points to; int8
 * rows through llmc_rt_sg_weight_row) or loads the graph `llmc compile
 * --npu-export` wrote for sg->name and a vendor tool compiled. */
static llmc_rt_status my_prepare(void *ctx, const llmc_rt_subgraph *sg, void **graph,
                                 llmc_rt_error *err)
{
    my_npu *npu = ctx;
    fprintf(stderr, "prepare %s: %u rows, %u ops, %u inputs, %u outputs\n", sg->name, sg->rows,
            sg->n_ops, sg->n_inputs, sg->n_outputs);
    npu->prepared++;
    return npu->inner.prepare(npu->inner.ctx, sg, graph, err);
}

/* Start graph on io[0, n_inputs) into the outputs after them (dense
 * buffers of the sizes prepare saw); return without waiting. */
static llmc_rt_status my_execute(void *ctx, void *graph, void *const *io, llmc_rt_error *err)
{
    my_npu *npu = ctx;
    npu->executed++;
    return npu->inner.execute(npu->inner.ctx, graph, io, err);
}

/* Has the execution finished (block: wait until it has)? */
static llmc_rt_status my_wait(void *ctx, int block, int *finished, llmc_rt_error *err)
{
    my_npu *npu = ctx;
    return npu->inner.wait(npu->inner.ctx, block, finished, err);
}

static void my_release(void *ctx, void *graph)
{
    my_npu *npu = ctx;
    npu->inner.release(npu->inner.ctx, graph);
}

static void *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    void *bytes = NULL;
    if (f && !fseek(f, 0, SEEK_END) && (*size = (size_t)ftell(f)) > 0 && !fseek(f, 0, SEEK_SET))
        bytes = aligned_alloc(64, (*size + 63) / 64 * 64);
    if (bytes && fread(bytes, 1, *size, f) != *size) {
        free(bytes);
        bytes = NULL;
    }
    if (f)
        fclose(f);
    return bytes;
}

static uint32_t parse_ids(char *text, int64_t *ids)
{
    uint32_t n = 0;
    for (char *t = strtok(text, ","); t && n < MAX_PROMPT; t = strtok(NULL, ","))
        ids[n++] = strtoll(t, NULL, 10);
    return n;
}

static int64_t argmax(const float *v, uint32_t n)
{
    uint32_t best = 0;
    for (uint32_t i = 1; i < n; i++)
        best = v[i] > v[best] ? i : best;
    return best;
}

static int fail(const char *what, const llmc_rt_error *err)
{
    fprintf(stderr, "npu_example: %s: %s\n", what, err->msg);
    return 1;
}

/* Prefill in chunks through the delegate, then n_new greedy ids. */
static int generate(llmc_rt_session *s, llmc_rt_chunked *chunked, const int64_t *prompt,
                    uint32_t n, int n_new, float *logits, uint32_t vocab_size)
{
    llmc_rt_error err;
    if (llmc_rt_chunked_prefill(chunked, prompt, n, logits, &err))
        return fail("prefill", &err);
    for (int k = 0; k < n_new; k++) {
        int64_t token = argmax(logits, vocab_size);
        printf(k ? " %lld" : "%lld", (long long)token);
        if (k + 1 < n_new && llmc_rt_session_feed(s, &token, 1, logits, &err)) /* decode: on the CPU */
            return fail("decode", &err);
    }
    printf("\n");
    return 0;
}

int main(int argc, char **argv)
{
    static int64_t prompt[MAX_PROMPT];
    size_t size = 0;
    void *bytes = argc == 4 ? read_file(argv[1], &size) : NULL;
    uint32_t n = bytes ? parse_ids(argv[2], prompt) : 0;
    llmc_rt_plan plan;
    llmc_rt_session s;
    llmc_rt_error err;
    if (!n)
        return fprintf(stderr, "usage: npu_example PLAN ID,ID,... N\n"), 2;
    if (llmc_rt_plan_open(&plan, bytes, size, 0, &err))
        return fail("plan", &err);
    size_t mem_size = llmc_rt_session_memory(&plan);
    void *mem = malloc(mem_size);
    if (!mem || llmc_rt_session_init(&s, &plan, mem, mem_size, &err))
        return fail("session", &err);

    my_npu npu = {0};
    llmc_ref_delegate *ref = llmc_ref_delegate_create();
    llmc_ref_delegate_table(ref, &npu.inner);
    llmc_rt_delegate table = {&npu, my_prepare, my_execute, my_wait, my_release};
    uint32_t lanes = 2; /* chunks in flight: each has its own copy of the arena */
    llmc_rt_plan_info info;
    llmc_rt_plan_info_of(&plan, &info);
    size_t chunked_size = llmc_rt_chunked_memory(&plan, info.max_context, lanes);
    void *chunked_mem = chunked_size != SIZE_MAX ? malloc(chunked_size) : NULL;
    llmc_rt_chunked *chunked = NULL;
    float *logits = malloc(sizeof(float) * info.vocab_size);
    int rc = 1;
    if (!chunked_mem || !logits)
        fprintf(stderr, "npu_example: no NPU subgraphs in the plan, or out of memory\n");
    else if (llmc_rt_chunked_init(&chunked, &s, &table, lanes, chunked_mem, chunked_size, &err))
        fail("chunked init", &err);
    else
        rc = generate(&s, chunked, prompt, n, atoi(argv[3]), logits, info.vocab_size);
    fprintf(stderr, "%u subgraphs prepared, %u executions\n", npu.prepared, npu.executed);
    llmc_rt_chunked_release(chunked);
    llmc_ref_delegate_destroy(ref);
    free(logits);
    free(chunked_mem);
    free(mem);
    free(bytes);
    return rc;
}
