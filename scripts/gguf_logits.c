/* Greedy decoding of a GGUF file by llama.cpp from token ids, printing
 * what `llmc run --prompt-ids ... --max-new N --logits-out FILE` prints:
 * the generated ids on one line, and FILE holding one float32 row of
 * vocabulary logits per generated token (the row its id is the argmax of,
 * the first one on ties).  tests/t_gguf.sh compares both with llmc's.
 *
 *   gguf_logits MODEL.gguf --prompt-ids 5,17,42 --max-new N --logits-out FILE [--threads T]
 *
 * llama.cpp runs on the CPU with float32 K and V caches (its default is
 * float16) and without flash attention (whose CPU kernel rounds Q to
 * float16: 6e-4 of the largest logit on the tiny exports, against 7e-7
 * without), the prompt in one llama_decode, then one token per call.
 * Built against a llama.cpp build, never part of llmc:
 *
 *   L=/path/to/llama.cpp
 *   cc -std=c11 -O2 scripts/gguf_logits.c -I$L/include -I$L/ggml/include \
 *      -L$L/build/bin -lllama -lggml -lggml-base -Wl,-rpath,$L/build/bin -o gguf_logits
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

enum { MAX_PROMPT = 4096 };

struct args {
    const char *model, *logits_out;
    llama_token prompt[MAX_PROMPT];
    int n_prompt, max_new, threads;
};

static int usage(void) {
    fprintf(stderr, "usage: gguf_logits MODEL.gguf --prompt-ids 5,17,42 --max-new N --logits-out FILE"
                    " [--threads T]\n");
    return 2;
}

/* "5,17,42" into ids; 0 on a malformed or too long list. */
static int parse_ids(const char *s, llama_token *ids, int *n) {
    *n = 0;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 0 || v > 0x7fffffff || *n == MAX_PROMPT || (*end && *end != ',')) return 0;
        ids[(*n)++] = (llama_token)v;
        s = *end ? end + 1 : end;
    }
    return *n > 0;
}

static int parse_args(int argc, char **argv, struct args *a) {
    memset(a, 0, sizeof *a);
    a->threads = 1;
    if (argc < 2) return 0;
    a->model = argv[1];
    for (int i = 2; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--prompt-ids")) {
            if (!parse_ids(v, a->prompt, &a->n_prompt)) return 0;
        } else if (!strcmp(k, "--max-new")) {
            a->max_new = atoi(v);
        } else if (!strcmp(k, "--logits-out")) {
            a->logits_out = v;
        } else if (!strcmp(k, "--threads")) {
            a->threads = atoi(v);
        } else {
            return 0;
        }
    }
    return argc % 2 == 0 && a->n_prompt > 0 && a->max_new > 0 && a->logits_out && a->threads > 0;
}

static llama_token argmax(const float *row, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (row[i] > row[best]) best = i;
    return best;
}

/* Decodes the prompt, then max_new - 1 generated tokens, writing each
 * step's logits row to out and printing the ids; 0 on success. */
static int generate(struct llama_context *ctx, int n_vocab, struct args *a, FILE *out) {
    struct llama_batch batch = llama_batch_get_one(a->prompt, a->n_prompt);
    llama_token next;
    for (int step = 0; step < a->max_new; step++) {
        if (llama_decode(ctx, batch) != 0) {
            fprintf(stderr, "gguf_logits: llama_decode failed at step %d\n", step);
            return 1;
        }
        const float *row = llama_get_logits_ith(ctx, -1);
        if (!row || fwrite(row, sizeof *row, (size_t)n_vocab, out) != (size_t)n_vocab) {
            fprintf(stderr, "gguf_logits: no logits or short write at step %d\n", step);
            return 1;
        }
        next = argmax(row, n_vocab);
        printf(step ? " %d" : "%d", next);
        batch = llama_batch_get_one(&next, 1);
    }
    printf("\n");
    return 0;
}

int main(int argc, char **argv) {
    static struct args a;
    if (!parse_args(argc, argv, &a)) return usage();
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model *model = llama_model_load_from_file(a.model, mp);
    if (!model) {
        fprintf(stderr, "gguf_logits: %s: llama.cpp cannot load it\n", a.model);
        return 3;
    }
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)(a.n_prompt + a.max_new);
    cp.n_batch = cp.n_ubatch = (uint32_t)a.n_prompt;
    cp.n_threads = cp.n_threads_batch = a.threads;
    cp.type_k = cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;   /* its CPU kernel rounds Q to float16 */
    struct llama_context *ctx = llama_init_from_model(model, cp);
    FILE *out = ctx ? fopen(a.logits_out, "wb") : NULL;
    int rc = 1;
    if (!ctx)
        fprintf(stderr, "gguf_logits: %s: no llama.cpp context\n", a.model);
    else if (!out)
        fprintf(stderr, "gguf_logits: %s: cannot write\n", a.logits_out);
    else
        rc = generate(ctx, llama_vocab_n_tokens(llama_model_get_vocab(model)), &a, out);
    if (out && fclose(out) != 0) rc = 1;
    if (rc != 0 && out) remove(a.logits_out);
    if (ctx) llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return rc;
}
