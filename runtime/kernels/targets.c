/* Plan targets: names (plan_enums.h) and the kernel table that runs each. */
#include "kernel_table.h"
#include "plan_format.h"
#include "rt_msg.h"

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

const rt_kernels *rt_kernels_for_target(const char *target, llmc_rt_error *err)
{
    switch (rt_target_index(target)) {
    case TARGET_GENERIC:
        return &rt_kernels_generic;
    case -1:
        rt_fail(err, LLMC_RT_E_TARGET, "target \"%s\" unknown; this runtime knows%s", NULL,
                RT_S(target, RT_TARGET_NAMES));
        return NULL;
    default:
        rt_fail(err, LLMC_RT_E_TARGET, "target \"%s\": this runtime was built without its "
                "kernels", NULL, RT_S(target));
        return NULL;
    }
}
