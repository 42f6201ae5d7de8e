/* `llmc bench --profile` (bench_profile.h). */
#include "bench_profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plan_enums.h"
#include "llmc_rt_internal.h"

static const char *layout_name(int layout)
{
#define BP_LAYOUT_(s, name, v, ...) v == layout ? #name:
    return LLMC_PLAN_LAYOUTS(BP_LAYOUT_) "?";
}

static const char *dtype_name(int dtype)
{
#define BP_DTYPE_(s, name, v, bits) v == dtype ? #name:
    return LLMC_PLAN_DTYPES(BP_DTYPE_) "?";
}

/* The group an op is timed in: its code, and for Linear W's format. */
static void group_name(const llmc_rt_plan *plan, uint32_t op, char *name, size_t size)
{
    llmc_rt_op_info info;
    if (llmc_rt_plan_op(plan, op, &info) != LLMC_RT_OK)
        snprintf(name, size, "?");
    else if (info.code == LLMC_RT_OP_Linear)
        snprintf(name, size, "Linear %s %s", layout_name(info.weight_layout),
                 dtype_name(info.weight_dtype));
    else
        snprintf(name, size, "%s", llmc_rt_op_name(info.code));
}

static uint32_t group_index(bench_profile *p, const char *name)
{
    uint32_t g = 0;
    while (g < p->n_groups && strcmp(p->groups[g].name, name))
        g++;
    if (g == p->n_groups)
        snprintf(p->groups[p->n_groups++].name, sizeof p->groups[g].name, "%s", name);
    return g;
}

int bench_profile_init(bench_profile *p, const llmc_rt_plan *plan)
{
    memset(p, 0, sizeof *p);
    p->n_ops = rt_plan_of(plan)->n_ops;
    p->groups = calloc(rt_plan_of(plan)->n_ops ? rt_plan_of(plan)->n_ops : 1, sizeof *p->groups);
    p->group_of = calloc(rt_plan_of(plan)->n_ops ? rt_plan_of(plan)->n_ops : 1, sizeof *p->group_of);
    if (!p->groups || !p->group_of)
        return -1;
    for (uint32_t i = 0; i < rt_plan_of(plan)->n_ops; i++) {
        char name[sizeof p->groups[0].name];
        group_name(plan, i, name, sizeof name);
        p->group_of[i] = group_index(p, name);
        p->groups[p->group_of[i]].ops++;
    }
    return 0;
}

void bench_profile_free(bench_profile *p)
{
    free(p->groups);
    free(p->group_of);
    memset(p, 0, sizeof *p);
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

void bench_profile_observe(void *ctx, uint32_t op_index, int end)
{
    bench_profile *p = ctx;
    uint64_t t = now_ns();
    if (!end)
        p->begin_ns = t;
    else if (p->ns && op_index < p->n_ops)
        p->ns[op_index] += t - p->begin_ns;
}

typedef struct {
    uint32_t group;
    uint64_t ns;
} group_time;

static int by_time_desc(const void *a, const void *b)
{
    uint64_t x = ((const group_time *)a)->ns, y = ((const group_time *)b)->ns;
    return x < y ? 1 : x > y ? -1 : 0;
}

static void print_row(const char *test, uint32_t threads, const char *name, uint32_t ops,
                      double share, double us_per_token, bool json)
{
    if (json)
        printf("{\"profile\": \"%s\", \"threads\": %u, \"op\": \"%s\", \"ops\": %u, "
               "\"share\": %.5f, \"us_per_token\": %.3f}\n",
               test, threads, name, ops, share, us_per_token);
    else
        printf("| %-28s | %5u | %6.1f %% | %12.2f |\n", name, ops, 100.0 * share, us_per_token);
}

void bench_profile_print(const bench_profile *p, const char *test, uint32_t threads,
                         const uint64_t *op_ns, double seconds, uint64_t tokens, bool json)
{
    group_time *t = calloc(p->n_groups ? p->n_groups : 1, sizeof *t);
    double total_ns = seconds * 1e9, in_ops = 0, per_token = tokens ? 1e3 * (double)tokens : 1;
    if (!t)
        return;
    for (uint32_t g = 0; g < p->n_groups; g++)
        t[g].group = g;
    for (uint32_t i = 0; i < p->n_ops; i++)
        t[p->group_of[i]].ns += op_ns[i];
    qsort(t, p->n_groups, sizeof *t, by_time_desc);
    if (!json)
        printf("\nprofile %s, %u thread%s: %.2f us per token\n| %-28s | %5s | %8s | %12s |\n"
               "| ---------------------------- | ----: | -------: | -----------: |\n",
               test, threads, threads == 1 ? "" : "s", total_ns / per_token, "op", "ops",
               "share", "us/token");
    for (uint32_t g = 0; g < p->n_groups; g++) {
        in_ops += (double)t[g].ns;
        print_row(test, threads, p->groups[t[g].group].name, p->groups[t[g].group].ops,
                  total_ns > 0 ? (double)t[g].ns / total_ns : 0, (double)t[g].ns / per_token,
                  json);
    }
    double outside = total_ns > in_ops ? total_ns - in_ops : 0;
    print_row(test, threads, "(outside ops)", 0, total_ns > 0 ? outside / total_ns : 0,
              outside / per_token, json);
    free(t);
}
