/* Plan target -> kernel table.  "generic" runs everywhere; a SIMD table is
 * in the list only where its directory is built (the #ifs choose table
 * entries and nothing else) and is handed out only after its CPU check. */
#include "kernel_table.h"
#include "rt_msg.h"

#if defined(__x86_64__)
#include "x86_avx2/x86_avx2.h"
#endif
#if defined(__aarch64__)
/* runtime/kernels/arm_neon/ */
extern const rt_kernels rt_kernels_neon_dot, rt_kernels_neon_i8mm;
bool rt_cpu_arm_dotprod_ok(void);
bool rt_cpu_arm_i8mm_ok(void);
#endif

typedef struct {
    const char *name;
    const rt_kernels *table;      /* NULL: known, but not built into this runtime */
    bool (*cpu_ok)(void);         /* does this CPU run the table? */
    const char *needs;            /* what cpu_ok checks, for messages */
    void (*missing)(char *buf, size_t cap); /* what this CPU lacks (NULL: say `needs`) */
} target_entry;

static bool any_cpu(void)
{
    return true;
}

static const target_entry targets[] = {
    {"generic", &rt_kernels_generic, any_cpu, "", NULL},
#if defined(__x86_64__)
    {"avx2", &rt_kernels_avx2, rt_cpu_x86_avx2_ok, "AVX2, FMA and F16C", rt_cpu_x86_avx2_missing},
#else
    {"avx2", NULL, NULL, "an x86-64 build", NULL},
#endif
#if defined(__aarch64__)
    {"neon-dot", &rt_kernels_neon_dot, rt_cpu_arm_dotprod_ok, "the dot product extension", NULL},
    {"neon-i8mm", &rt_kernels_neon_i8mm, rt_cpu_arm_i8mm_ok,
     "the int8 matrix multiply extension (i8mm)", NULL},
#else
    {"neon-dot", NULL, NULL, "an aarch64 build", NULL},
    {"neon-i8mm", NULL, NULL, "an aarch64 build", NULL},
#endif
};

#define N_TARGETS (sizeof targets / sizeof *targets)

static bool same_name(const char *a, const char *b)
{
    while (*a && *a == *b)
        a++, b++;
    return *a == *b;
}

/* What the CPU lacks for entry t, into buf. */
static const char *missing_text(const target_entry *t, char *buf, size_t cap)
{
    if (!t->missing)
        return t->needs;
    t->missing(buf, cap);
    return buf;
}

const rt_kernels *rt_kernels_for_target(const char *target, llmc_rt_error *err)
{
    if (!target) {
        rt_fail(err, LLMC_RT_E_TARGET, "the plan names no target", NULL, NULL);
        return NULL;
    }
    for (size_t i = 0; i < N_TARGETS; i++) {
        const target_entry *t = &targets[i];
        if (!same_name(t->name, target))
            continue;
        if (!t->table) {
            rt_fail(err, LLMC_RT_E_TARGET, "target '%s': this runtime was built without %s "
                    "kernels (they need %s)", NULL, RT_S(target, target, t->needs));
            return NULL;
        }
        if (!t->cpu_ok()) {
            char buf[128];
            rt_fail(err, LLMC_RT_E_TARGET, "target '%s' needs CPU features this CPU lacks: %s",
                    NULL, RT_S(target, missing_text(t, buf, sizeof buf)));
            return NULL;
        }
        return t->table;
    }
    rt_fail(err, LLMC_RT_E_TARGET, "unknown target '%s' (known: generic, avx2, neon-dot, "
            "neon-i8mm)", NULL, RT_S(target));
    return NULL;
}
