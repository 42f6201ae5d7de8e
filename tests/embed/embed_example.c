/* The README's embedding example: greedy generation with nothing but
 * llmc_rt.h, libllmcrt.a and libm.  usage: embed_example PLAN N ID... */
#include <stdio.h>
#include <stdlib.h>
#include "llmc_rt.h"

int main(int argc, char **argv)
{
    FILE *f = fopen(argv[1], "rb");                       /* or mmap, or flash */
    fseek(f, 0, SEEK_END); long size = ftell(f); rewind(f);
    void *bytes = malloc((size_t)size);                   /* plans need 8-byte alignment */
    if (fread(bytes, 1, (size_t)size, f) != (size_t)size) return 1;
    fclose(f);
    llmc_rt_plan plan; llmc_rt_session s; llmc_rt_error err;
    if (llmc_rt_plan_open(&plan, bytes, (size_t)size, 0, &err)) { fprintf(stderr, "%s\n", err.msg); return 1; }
    size_t mem_size = llmc_rt_session_memory(&plan);    /* arena + KV store */
    void *mem = malloc(mem_size);
    llmc_rt_plan_info info;                              /* vocabulary, context, ... */
    llmc_rt_plan_info_of(&plan, &info);
    float *logits = malloc(info.vocab_size * sizeof(float));
    if (llmc_rt_session_init(&s, &plan, mem, mem_size, &err)) { fprintf(stderr, "%s\n", err.msg); return 1; }
    int n_new = atoi(argv[2]), n_prompt = argc - 3;
    int64_t token, prompt[256];
    for (int i = 0; i < n_prompt; i++) prompt[i] = atoll(argv[3 + i]);
    for (int k = 0; k < n_new; k++) {
        if (llmc_rt_session_feed(&s, k ? &token : prompt, k ? 1 : (uint32_t)n_prompt, logits, &err)) return 1;
        token = 0;                                        /* greedy: argmax */
        for (uint32_t v = 1; v < info.vocab_size; v++) if (logits[v] > logits[token]) token = v;
        printf(k ? " %lld" : "%lld", (long long)token);
    }
    printf("\n");
    free(logits); free(mem); free(bytes);
    return 0;
}
