/* Plan targets: their names and tile sizes (plan_enums.h), and the kernel
 * table that runs each.  "generic" runs everywhere; a SIMD table is in the
 * list only where its directory is built (the #ifs choose table entries and
 * nothing else) and is handed out only after its CPU check. */
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
    /* a table for the same plans with bitwise the same outputs, faster on
     * a CPU that passes faster_ok (NULL: none) */
    const rt_kernels *faster;
    bool (*faster_ok)(void);
} target_kernels;

static bool any_cpu(void)
{
    return true;
}

/* Indexed by TARGET_*. */
static const target_kernels kernels_of[TARGET_COUNT] = {
    [TARGET_GENERIC] = {&rt_kernels_generic, any_cpu, "", NULL, NULL, NULL},
#if defined(__x86_64__)
    [TARGET_AVX2] = {&rt_kernels_avx2, rt_cpu_x86_avx2_ok, "AVX2, FMA and F16C",
                     rt_cpu_x86_avx2_missing, &rt_kernels_avx2_avx512,
                     rt_cpu_x86_avx512_vnni_ok},
#else
    [TARGET_AVX2] = {NULL, NULL, "an x86-64 build", NULL, NULL, NULL},
#endif
#if defined(__aarch64__)
    [TARGET_NEON_DOT] = {&rt_kernels_neon_dot, rt_cpu_arm_dotprod_ok,
                         "the dot product extension", NULL, NULL, NULL},
    [TARGET_NEON_I8MM] = {&rt_kernels_neon_i8mm, rt_cpu_arm_i8mm_ok,
                          "the int8 matrix multiply extension (i8mm)", NULL,
                          NULL, NULL},
#else
    [TARGET_NEON_DOT] = {NULL, NULL, "an aarch64 build", NULL, NULL, NULL},
    [TARGET_NEON_I8MM] = {NULL, NULL, "an aarch64 build", NULL, NULL, NULL},
#endif
};

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
    return t->faster && t->faster_ok() ? t->faster : t->table;
}

const rt_kernels *rt_kernels_for_isa(const char *target, const char *isa, llmc_rt_error *err)
{
    const rt_kernels *best = rt_kernels_for_target(target, err);
    if (!best || !isa)
        return best;
    const target_kernels *t = &kernels_of[rt_target_index(target)];
    if (same_name(isa, t->table->isa))
        return t->table;
    if (t->faster && t->faster_ok() && same_name(isa, t->faster->isa))
        return t->faster;
    rt_fail(err, LLMC_RT_E_TARGET, "target \"%s\" has no kernels \"%s\" on this CPU; it runs "
            "%s%s%s", NULL, RT_S(target, isa, t->table->isa, best != t->table ? " and " : "",
                                 best != t->table ? best->isa : ""));
    return NULL;
}
