/* The tokenizer's two hostile inputs: a tokenizer.json (the compiler's
 * JSON reader and tokenizer_json.c) and a compiled tokenizer as a plan's
 * tokenizer segment holds it (llmc_rt_tokenizer_open, the runtime's
 * verifier).  Input starting with the compiled magic "LTOK" is opened as
 * compiled bytes, anything else is compiled as tokenizer.json; whatever
 * opens encodes a few texts (ill-formed UTF-8 and the input's own bytes
 * among them) and decodes every id it produced plus the first ids. */
#include "fuzz_common.h"
#include "llmc_rt.h"
#include "tokenizer/tokenizer_json.h"

static void exercise_text(const llmc_rt_tokenizer *tok, const char *text, size_t len)
{
    size_t scratch_size = llmc_rt_tokenizer_scratch(tok, len), n = 0, out_n;
    size_t max_ids = 4 * len + 160;
    void *scratch = malloc(scratch_size);
    int64_t *ids = malloc(max_ids * sizeof *ids);
    char *out = malloc(llmc_rt_detok_max_bytes(tok));
    llmc_rt_error err;
    if (scratch && ids && out) {
        for (int special = 0; special < 2; special++)
            llmc_rt_tokenizer_encode(tok, text, len, special, scratch, scratch_size, ids, max_ids, &n, &err);
        llmc_rt_detok d;
        llmc_rt_detok_init(tok, &d);
        for (size_t i = 0; i < n + 64; i++)
            llmc_rt_detok_token(tok, &d, i < n ? ids[i] : (int64_t)(i - n), out, llmc_rt_detok_max_bytes(tok),
                                &out_n, &err);
        llmc_rt_detok_finish(tok, &d, out, llmc_rt_detok_max_bytes(tok), &out_n, &err);
    }
    free(scratch);
    free(ids);
    free(out);
}

static void exercise(const llmc_rt_tokenizer *tok, const uint8_t *data, size_t size)
{
    static const char *const texts[] = {"Hello world's 123  test\n\tx", "\xff\xfe\xc3(\xe2\x82 \xf0\x9f\x98",
                                        "e\xcc\x81 \xea\xb0\x80\xe1\x84\x80\xe1\x85\xa1 <|bos|> <s>", ""};
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) exercise_text(tok, texts[i], strlen(texts[i]));
    exercise_text(tok, (const char *)data, size < 256 ? size : 256);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *bytes = fuzz_copy(data, size);
    if (!bytes) return 0;
    llmc_rt_tokenizer tok;
    llmc_rt_error rt_err;
    if (size >= 4 && !memcmp(bytes, "LTOK", 4)) {
        if (llmc_rt_tokenizer_open(&tok, bytes, size, &rt_err) == LLMC_RT_OK) exercise(&tok, bytes, size);
    } else {
        uint8_t *compiled = NULL;
        size_t compiled_size = 0;
        llmc_error err = {0};
        if (llmc_tokenizer_compile_text("fuzz.json", bytes, size, NULL, 0, &compiled, &compiled_size, &err) == LLMC_OK) {
            /* what the compiler writes, the runtime must accept */
            if (llmc_rt_tokenizer_open(&tok, compiled, compiled_size, &rt_err) != LLMC_RT_OK) abort();
            exercise(&tok, bytes, size);
        }
        free(compiled);
    }
    free(bytes);
    return 0;
}
