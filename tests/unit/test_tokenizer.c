/* The runtime tokenizer on a hand-written SentencePiece-style tokenizer.json
 * whose ids are worked out by hand: BPE merge order, byte fallback, <unk>
 * fusing, added tokens, special tokens, the streaming decoder holding split
 * UTF-8, and the errors for short scratch, short id arrays and corrupted
 * compiled bytes. */
#include <stdlib.h>
#include <string.h>

#include "llmc_rt.h"
#include "tap.h"
#include "tokenizer_format.h"
#include "tokenizer_state.h"
#include "tokenizer/tokenizer_json.h"

/* ids: <unk> 0, <s> 1, </s> 2, <0xC3> 3, <0xA9> 4, U+2581 5, a 6, b 7,
 * U+2581a 8, ab 9, U+2581ab 10, <x> 11 (added, not special).  Merges in rank
 * order: "a b", "U+2581 a", "U+2581a b"; "a b" outranks "U+2581 a", so
 * " ab" becomes U+2581 + ab (5, 9), never U+2581ab. */
static const char TOKENIZER[] =
    "{\"added_tokens\": [{\"id\": 0, \"content\": \"<unk>\", \"special\": true, \"normalized\": false},"
    " {\"id\": 1, \"content\": \"<s>\", \"special\": true, \"normalized\": false},"
    " {\"id\": 2, \"content\": \"</s>\", \"special\": true, \"normalized\": false},"
    " {\"id\": 11, \"content\": \"<x>\", \"special\": false, \"normalized\": false}],"
    " \"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Prepend\", \"prepend\": \"\\u2581\"},"
    "   {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"\\u2581\"}]},"
    " \"pre_tokenizer\": null,"
    " \"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<s>\"}},"
    "   {\"Sequence\": {\"id\": \"A\"}}, {\"SpecialToken\": {\"id\": \"</s>\"}}]},"
    " \"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Replace\", \"pattern\": {\"String\": \"\\u2581\"},"
    "   \"content\": \" \"}, {\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"},"
    "   {\"type\": \"Strip\", \"content\": \" \", \"start\": 1, \"stop\": 0}]},"
    " \"model\": {\"type\": \"BPE\", \"unk_token\": \"<unk>\", \"byte_fallback\": true, \"fuse_unk\": true,"
    "   \"vocab\": {\"<unk>\": 0, \"<s>\": 1, \"</s>\": 2, \"<0xC3>\": 3, \"<0xA9>\": 4, \"\\u2581\": 5, \"a\": 6,"
    "     \"b\": 7, \"\\u2581a\": 8, \"ab\": 9, \"\\u2581ab\": 10},"
    "   \"merges\": [\"a b\", \"\\u2581 a\", \"\\u2581a b\"]}}";

static llmc_rt_tokenizer tok;

static int encode(const char *text, int special, int64_t *ids, size_t max_ids, size_t *n)
{
    static char scratch[1 << 16];
    llmc_rt_error err;
    return llmc_rt_tokenizer_encode(&tok, text, strlen(text), special, scratch,
                                    llmc_rt_tokenizer_scratch(&tok, strlen(text)), ids, max_ids, n, &err);
}

static int ids_are(const char *text, int special, const int64_t *want, size_t n_want)
{
    int64_t ids[64];
    size_t n = 0;
    if (encode(text, special, ids, 64, &n) != LLMC_RT_OK || n != n_want) return 0;
    return memcmp(ids, want, n * sizeof *ids) == 0;
}

/* Decodes ids one at a time; returns the concatenated text in out. */
static size_t decode(const int64_t *ids, size_t n, char *out, int finish)
{
    llmc_rt_detok d;
    size_t total = 0, got;
    char piece[256];
    llmc_rt_detok_init(&tok, &d);
    for (size_t i = 0; i < n; i++) {
        if (llmc_rt_detok_token(&tok, &d, ids[i], piece, sizeof piece, &got, NULL)) return SIZE_MAX;
        memcpy(out + total, piece, got);
        total += got;
    }
    if (finish && !llmc_rt_detok_finish(&tok, &d, piece, sizeof piece, &got, NULL)) {
        memcpy(out + total, piece, got);
        total += got;
    }
    out[total] = 0;
    return total;
}

int main(void)
{
    uint8_t *bytes = NULL;
    size_t size = 0;
    llmc_error cerr = {0};
    llmc_rt_error err;
    int rc = llmc_tokenizer_compile_text("unit.json", (const uint8_t *)TOKENIZER, sizeof TOKENIZER - 1, NULL, 0,
                                         &bytes, &size, &cerr);
    CHECK(rc == LLMC_OK, "the hand-written tokenizer.json compiles (%s)", cerr.msg);
    if (rc) return TAP_DONE();
    CHECK(llmc_rt_tokenizer_open(&tok, bytes, size, &err) == LLMC_RT_OK, "its compiled bytes verify");
    const rt_tokenizer *fields = rt_tok_const(&tok);
    CHECK(fields->model == TOK_MODEL_SENTENCEPIECE && fields->n_ids == 12 && fields->unk == 0,
          "SentencePiece, 12 ids, unk 0");

    CHECK(ids_are("ab", 0, (const int64_t[]){5, 9}, 2), "\"ab\": a+b (rank 0) before U+2581+a (rank 1)");
    CHECK(ids_are("a", 0, (const int64_t[]){8}, 1), "\"a\": U+2581a");
    CHECK(ids_are("ab", 1, (const int64_t[]){1, 5, 9, 2}, 4), "add_special puts <s> and </s> around");
    CHECK(ids_are("\xc3\xa9", 0, (const int64_t[]){5, 3, 4}, 3), "e-acute: byte fallback <0xC3><0xA9>");
    CHECK(ids_are("zz", 0, (const int64_t[]){5, 0}, 2), "two unknown characters without byte tokens: one fused <unk>");
    CHECK(ids_are("a<x>b", 0, (const int64_t[]){8, 11, 5, 7}, 4), "the added token <x> is cut out before normalizing");
    CHECK(ids_are("\xff", 0, (const int64_t[]){5, 0}, 2), "ill-formed UTF-8 reads as U+FFFD (no bytes for it: <unk>)");

    char text[256];
    CHECK(decode((const int64_t[]){5, 9, 5, 8}, 4, text, 1) == 5 && !strcmp(text, "ab  a"),
          "decode: U+2581 reads as a space, the leading one stripped");
    CHECK(decode((const int64_t[]){8, 3}, 2, text, 0) == 1 && !strcmp(text, "a"),
          "decode: a lone <0xC3> is held back");
    CHECK(decode((const int64_t[]){8, 3, 4}, 3, text, 1) == 3 && !strcmp(text, "a\xc3\xa9"),
          "decode: <0xC3><0xA9> completes e-acute");
    CHECK(decode((const int64_t[]){3, 6}, 2, text, 1) == 4 && !strcmp(text, "\xef\xbf\xbd" "a"),
          "decode: a sequence cut by a piece is U+FFFD");
    CHECK(decode((const int64_t[]){8, 3}, 2, text, 1) == 4 && !strcmp(text, "a\xef\xbf\xbd"),
          "decode: finish flushes a held sequence as U+FFFD");

    int64_t ids[2];
    size_t n = 0;
    CHECK(encode("ab ab ab", 0, ids, 2, &n) == LLMC_RT_E_BOUNDS && n == 2, "more ids than max_ids: E_BOUNDS");
    char small[8];
    CHECK(llmc_rt_tokenizer_encode(&tok, "ab", 2, 0, small, sizeof small, ids, 2, &n, &err) == LLMC_RT_E_MEMORY,
          "scratch below llmc_rt_tokenizer_scratch(): E_MEMORY");
    CHECK(llmc_rt_detok_token(&tok, &(llmc_rt_detok){0}, 12, text, sizeof text, &n, &err) == LLMC_RT_E_ARG,
          "decode of an id past the vocabulary: E_ARG");

    uint8_t *bad = malloc(size);
    memcpy(bad, bytes, size);
    bad[4 * TOK_H_N_IDS + 3] = 0x7F;   /* n_ids far beyond the tables */
    CHECK(llmc_rt_tokenizer_open(&tok, bad, size, &err) == LLMC_RT_E_CORRUPT, "a corrupted id count is refused: %s",
          err.msg);
    memcpy(bad, bytes, size);
    CHECK(llmc_rt_tokenizer_open(&tok, bad, size - 4, &err) == LLMC_RT_E_CORRUPT,
          "a segment 4 bytes shorter than recorded is refused: %s", err.msg);
    free(bad);
    free(bytes);
    return TAP_DONE();
}
