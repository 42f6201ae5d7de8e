/* The peak loops of `llmc bench --roofline` as compiled: in `objdump -d
 * --no-show-raw-insn` of roofline_x86.o (argv[1], else
 * $BUILD/compiler/tools/roofline_x86.o), each loop's hot loop -- the body
 * of a backward branch in its function -- holds exactly its table's
 * insns_per_iter instructions (roofline.h: the mnemonic pattern insn, on
 * registers of the table's width), the count its peak's operations derive
 * from, and widens_per_iter of its widening instruction (the int8 mixes'
 * vpmaddwd: 1 per vpmaddubsw for bits 8, 1 per 8 for bits 4), which its
 * bound counts.  A compiler merging chains, or a loop edited without its table
 * row, fails here.  No AVX-512 hardware needed: the object is only read
 * (the read loops, AVX2, also run: both shapes must sum a buffer alike). */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "tools/roofline.h"

#if defined(__x86_64__)

#define MAX_LINES 8192

typedef struct {
    char fn[128];        /* the function the instruction is in */
    unsigned long addr;
    char mnem[32], ops[160];
} insn_line;

static insn_line lines[MAX_LINES];
static size_t n_lines;

/* The disassembly of obj into lines[]; 0 on success. */
static int disassemble(const char *obj)
{
    char cmd[1200], text[512], fn[128] = "";
    snprintf(cmd, sizeof cmd, "objdump -d --no-show-raw-insn '%s' 2>&1", obj);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    n_lines = 0;
    while (fgets(text, sizeof text, p) && n_lines < MAX_LINES) {
        unsigned long addr;
        insn_line *l = &lines[n_lines];
        if (sscanf(text, "%lx <%127[^>]>:", &addr, fn) == 2)
            continue;
        l->ops[0] = 0;
        if (sscanf(text, " %lx:\t%31s %159[^\n]", &l->addr, l->mnem, l->ops) >= 2 && fn[0]) {
            if (l->mnem[0] == '{') /* an encoding prefix ({vex}): the mnemonic follows */
                sscanf(text, " %*x:\t%*s %31s %159[^\n]", l->mnem, l->ops);
            snprintf(l->fn, sizeof l->fn, "%s", fn);
            n_lines++;
        }
    }
    return pclose(p) == 0 && n_lines ? 0 : -1;
}

/* fn is `name` or a compiler's clone of it (`name.constprop.0`). */
static int is_function(const char *fn, const char *name)
{
    size_t n = strlen(name);
    return !strncmp(fn, name, n) && (fn[n] == 0 || fn[n] == '.');
}

typedef struct {
    int found;           /* the function is in the object */
    int loops;           /* backward branches in it */
    unsigned matching;   /* in the hot loop: insn on registers of the table's width */
    unsigned any_width;  /* in the hot loop: insn on any registers */
    unsigned widens, widens_any; /* in the hot loop: widen, on registers of the width / any */
} loop_count;

/* The backward branch at lines[b] (to a target in the same function): of
 * the instructions between its target and itself, those matching pattern. */
static void count_body(size_t b, const char *pattern, const char *reg, unsigned *matching,
                       unsigned *any_width)
{
    unsigned long target = strtoul(lines[b].ops, NULL, 16);
    *matching = *any_width = 0;
    for (size_t i = b; i-- > 0 && !strcmp(lines[i].fn, lines[b].fn) && lines[i].addr >= target;) {
        if (fnmatch(pattern, lines[i].mnem, 0))
            continue;
        (*any_width)++;
        *matching += strstr(lines[i].ops, reg) != NULL;
    }
}

/* The hot loop of in->symbol: of its backward branches, the one whose body
 * holds the most `insn` instructions. */
static loop_count count_loop(const llmc_roofline_insn *in)
{
    loop_count c = {0};
    const char *reg = in->bits == 512 ? "%zmm" : in->bits == 256 ? "%ymm" : "%xmm";
    for (size_t b = 0; b < n_lines; b++) {
        if (!is_function(lines[b].fn, in->symbol))
            continue;
        c.found = 1;
        unsigned long target = strtoul(lines[b].ops, NULL, 16);
        if (lines[b].mnem[0] != 'j' || !strchr(lines[b].ops, '<') || target > lines[b].addr)
            continue;
        c.loops++;
        unsigned matching, any_width;
        count_body(b, in->insn, reg, &matching, &any_width);
        if (any_width > c.any_width || (any_width == c.any_width && matching > c.matching)) {
            c.matching = matching, c.any_width = any_width;
            if (in->widen)
                count_body(b, in->widen, reg, &c.widens, &c.widens_any);
        }
    }
    return c;
}

static void check_insn(const char *isa, const char *what, const llmc_roofline_insn *in)
{
    loop_count c = count_loop(in);
    CHECK(c.found && c.loops > 0, "%s %s: function %s found with a loop (%d backward branches)", isa, what,
          in->symbol, c.loops);
    CHECK(c.matching == in->insns_per_iter && c.any_width == in->insns_per_iter,
          "%s %s: %u %s per iteration of %s's hot loop (%u on any registers), the table counts %u "
          "(%.0f ops per iteration)",
          isa, what, c.matching, in->insn, in->symbol, c.any_width, in->insns_per_iter,
          llmc_roofline_ops_per_iter(in));
    if (in->widen)
        CHECK(c.widens == in->widens_per_iter && c.widens_any == in->widens_per_iter,
              "%s %s: %u %s per iteration of %s's hot loop (%u on any registers), the table counts %u",
              isa, what, c.widens, in->widen, in->symbol, c.widens_any, in->widens_per_iter);
}

/* Every table's read loops sum a buffer alike (a word per position,
 * 4096 words): the two shapes read the same bytes. */
static void check_read_sums(const llmc_roofline_loops *t)
{
    if (!__builtin_cpu_supports("avx2"))
        return;
    enum { WORDS = 4096 };
    static uint64_t words[WORDS] __attribute__((aligned(32)));
    uint64_t want = 0;
    for (uint64_t i = 0; i < WORDS; i++)
        want += words[i] = i * 2654435761u;
    for (int l = 0; l < LLMC_READ_LOOPS && t->read_sum[l]; l++) {
        uint64_t got = t->read_sum[l](words, WORDS);
        CHECK(got == want, "%s read loop %d sums 4096 words: %llu, want %llu", t->isa, l,
              (unsigned long long)got, (unsigned long long)want);
    }
}

int main(int argc, char **argv)
{
    const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
    char obj[600];
    snprintf(obj, sizeof obj, "%s/compiler/tools/roofline_x86.o", build);
    const char *path = argc > 1 ? argv[1] : obj;
    int ok = disassemble(path) == 0;
    CHECK(ok, "objdump -d %s: %zu instructions", path, n_lines);
    const llmc_roofline_loops *tables[] = {&llmc_roofline_avx2, &llmc_roofline_avx2_avx512,
                                           &llmc_roofline_avx2_avxvnni,
                                           &llmc_roofline_avx2_avx512ymm};
    for (size_t t = 0; ok && t < sizeof tables / sizeof *tables; t++) {
        check_read_sums(tables[t]);
        check_insn(tables[t]->isa, "fp32", &tables[t]->fma);
        for (int m = 0; m < LLMC_INT8_MIXES; m++) {
            char what[32];
            snprintf(what, sizeof what, "int8 %s", llmc_int8_mix_name((llmc_int8_mix)m));
            check_insn(tables[t]->isa, what, &tables[t]->int8[m]);
        }
    }
    return TAP_DONE();
}

#else

int main(void)
{
    printf("ok 1 - # SKIP roofline_x86.o is built on x86-64 hosts only\n");
    return TAP_DONE();
}

#endif
