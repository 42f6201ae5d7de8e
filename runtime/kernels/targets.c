/* Plan targets: their names and tile sizes (plan_enums.h), and the kernel
 * table that runs each.  "generic" runs everywhere; a SIMD table is in the
 * list only where its directory is built (the #ifs choose table entries,
 * and faster_table's lookup of x86-64's faster tables) and is handed out
 * only after its CPU check. */
#include "kernel_table.h"
#include "plan_format.h"
#include "rt_msg.h"

#if defined(__x86_64__)
#include "x86/x86_simd.h"
#endif
#if defined(__aarch64__)
#include "arm_neon/q_neon.h"
#endif

static bool same_name(const char *a, const char *b)
{
    while (*a && *a == *b) {
        a++;
        b++;
    }
    return *a == *b;
}

int rt_target_index(const char *name)
{
#define TARGET_NAME_(s, text, ...) text,
    static const char *const names[TARGET_COUNT] = {LLMC_PLAN_TARGETS(TARGET_NAME_)};
    for (int i = 0; name && i < TARGET_COUNT; i++)
        if (same_name(name, names[i]))
            return i;
    return -1;
}

const rt_target_info *rt_target_info_of(int index)
{
#define TARGET_INFO_(s, text, q_hp, q_lp, q_ep, f_hp, f_ep) {text, q_hp, q_lp, q_ep, f_hp, f_ep},
    static const rt_target_info info[TARGET_COUNT] = {LLMC_PLAN_TARGETS(TARGET_INFO_)};
    return index >= 0 && index < TARGET_COUNT ? &info[index] : NULL;
}

typedef struct {
    const rt_kernels *table;      /* NULL: known, but not built into this runtime */
    bool (*cpu_ok)(void);         /* does this CPU run the table? */
    const char *needs;            /* what cpu_ok checks, for messages */
    void (*missing)(char *buf, size_t cap); /* what this CPU lacks (NULL: say `needs`) */
    /* the i-th table for the same plans with bitwise the same outputs that
     * this CPU runs and that is faster than `table`, the fastest first;
     * NULL past the last (NULL: none) */
    const rt_kernels *(*faster)(int i);
} target_kernels;

static bool any_cpu(void)
{
    return true;
}

/* Indexed by TARGET_*. */
static const target_kernels kernels_of[TARGET_COUNT] = {
    [TARGET_GENERIC] = {&rt_kernels_generic, any_cpu, "", NULL, NULL},
#if defined(__x86_64__)
    [TARGET_AVX2] = {&rt_kernels_avx2, rt_cpu_x86_avx2_ok, "AVX2, FMA and F16C",
                     rt_cpu_x86_avx2_missing, rt_cpu_x86_faster_table},
#else
    [TARGET_AVX2] = {NULL, NULL, "an x86-64 build", NULL, NULL},
#endif
#if defined(__aarch64__)
    [TARGET_NEON_DOT] = {&rt_kernels_neon_dot, rt_cpu_arm_dotprod_ok,
                         "the dot product extension", NULL, NULL},
    [TARGET_NEON_I8MM] = {&rt_kernels_neon_i8mm, rt_cpu_arm_i8mm_ok,
                          "the int8 matrix multiply extension (i8mm)", NULL, NULL},
#else
    [TARGET_NEON_DOT] = {NULL, NULL, "an aarch64 build", NULL, NULL},
    [TARGET_NEON_I8MM] = {NULL, NULL, "an aarch64 build", NULL, NULL},
#endif
};

/* The i-th faster table of t on this CPU.  Only x86-64 has any; elsewhere
 * there is nothing to look up (which keeps the Cortex-M core's .text in
 * its budget, firmware.md). */
static const rt_kernels *faster_table(const target_kernels *t, int i)
{
#if defined(__x86_64__)
    return t->faster ? t->faster(i) : NULL;
#else
    (void)t;
    (void)i;
    return NULL;
#endif
}

/* What the CPU lacks for entry t, into buf. */
static const char *missing_text(const target_kernels *t, char *buf, size_t cap)
{
    if (!t->missing)
        return t->needs;
    t->missing(buf, cap);
    return buf;
}

const rt_kernels *rt_kernels_for_target(const char *target, llmc_rt_error *err)
{
    int i = rt_target_index(target);
    if (i < 0) {
        rt_fail(err, LLMC_RT_E_TARGET, "target \"%s\" unknown; this runtime knows%s", NULL,
                RT_S(target ? target : "", RT_TARGET_NAMES));
        return NULL;
    }
    const target_kernels *t = &kernels_of[i];
    if (!t->table) {
        rt_fail(err, LLMC_RT_E_TARGET, "target \"%s\": this runtime was built without its "
                "kernels (they need %s)", NULL, RT_S(target, t->needs));
        return NULL;
    }
    if (!t->cpu_ok()) {
        char buf[128];
        rt_fail(err, LLMC_RT_E_TARGET, "target \"%s\" needs CPU features this CPU lacks: %s",
                NULL, RT_S(target, missing_text(t, buf, sizeof buf)));
        return NULL;
    }
    const rt_kernels *fastest = faster_table(t, 0);
    return fastest ? fastest : t->table;
}

const rt_kernels *rt_kernels_for_isa(const char *target, const char *isa, llmc_rt_error *err)
{
    const rt_kernels *best = rt_kernels_for_target(target, err);
    if (!best || !isa)
        return best;
    const target_kernels *t = &kernels_of[rt_target_index(target)];
    const rt_kernels *k = t->table;
    for (int i = 0; k; k = faster_table(t, i++))
        if (same_name(isa, k->isa))
            return k;
    /* the message names the target's table and up to three faster ones
     * (x86-64 has three: rt_cpu_x86_faster_table) */
    const rt_kernels *f0 = faster_table(t, 0), *f1 = faster_table(t, 1), *f2 = faster_table(t, 2);
    rt_fail(err, LLMC_RT_E_TARGET, "target \"%s\" has no kernels \"%s\" on this CPU; it runs "
            "%s%s%s%s%s%s%s", NULL, RT_S(target, isa, t->table->isa, f0 ? ", " : "",
                                       f0 ? f0->isa : "", f1 ? ", " : "", f1 ? f1->isa : "",
                                       f2 ? ", " : "", f2 ? f2->isa : ""));
    return NULL;
}

uint32_t rt_gemv_prefetch_default(void)
{
#if defined(__x86_64__)
    return rt_cpu_x86_gemv_prefetch();
#else
    return 0;
#endif
}

const rt_kernels *rt_kernels_tuned(const char *target, const rt_kernels *fastest, uint32_t isa)
{
    const rt_kernels *k = fastest && isa ? rt_kernels_for_isa(target, rt_kernel_isa_name(isa), NULL)
                                         : NULL;
    return k ? k : fastest;
}
