/* This machine for `llmc bench --roofline` (roofline.h): the CPU's model
 * name, its highest clock and its kind of core, from Linux's cpufreq and
 * /proc/cpuinfo (the first CPU's block). */
#include "roofline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* cpufreq's highest clock (boost included) in MHz; 0 if absent (most VMs). */
static double cpufreq_max_mhz(void)
{
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", "r");
    double khz = 0;
    if (f) {
        if (fscanf(f, "%lf", &khz) != 1)
            khz = 0;
        fclose(f);
    }
    return khz / 1e3;
}

typedef struct {
    bool amd, avx512f;
    long family, model;
    double mhz;
} cpuinfo_fields;

/* One "key<tabs>: value" line of /proc/cpuinfo into cpu and f. */
static void read_field(const char *line, llmc_cpu_info *cpu, cpuinfo_fields *f)
{
    const char *colon = strchr(line, ':');
    if (!colon)
        return;
    size_t key = strcspn(line, "\t:");
    const char *value = colon + 1 + (colon[1] == ' ');
    if (key == 10 && !strncmp(line, "model name", key)) {
        snprintf(cpu->model, sizeof cpu->model, "%.*s", (int)strcspn(value, "\n"), value);
    } else if (key == 9 && !strncmp(line, "vendor_id", key)) {
        f->amd = !strncmp(value, "AuthenticAMD", 12);
    } else if (key == 10 && !strncmp(line, "cpu family", key)) {
        f->family = strtol(value, NULL, 10);
    } else if (key == 5 && !strncmp(line, "model", key)) {
        f->model = strtol(value, NULL, 10);
    } else if (key == 7 && !strncmp(line, "cpu MHz", key)) {
        f->mhz = strtod(value, NULL);
    } else if (key == 5 && !strncmp(line, "flags", key)) {
        f->avx512f = strstr(value, " avx512f ") || strstr(value, " avx512f\n");
    }
}

/* Zen 1 (and Zen+): AMD family 17h below model 30h; Zen 4: family 19h with
 * AVX-512 (Zen 3, the same family, has none). */
static llmc_core_kind core_kind(const cpuinfo_fields *f)
{
    if (f->amd && f->family == 0x17 && f->model < 0x30)
        return LLMC_CORE_ZEN1;
    if (f->amd && f->family == 0x19 && f->avx512f)
        return LLMC_CORE_ZEN4;
    return LLMC_CORE_OTHER;
}

void llmc_cpu_info_read(llmc_cpu_info *cpu)
{
    memset(cpu, 0, sizeof *cpu);
    snprintf(cpu->model, sizeof cpu->model, "unknown");
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    cpu->cpus = online > 0 ? (uint32_t)online : 1;
    cpuinfo_fields f = {false, false, -1, -1, 0};
    FILE *in = fopen("/proc/cpuinfo", "r");
    char line[4096];
    while (in && fgets(line, sizeof line, in) && line[0] != '\n')
        read_field(line, cpu, &f);
    if (in)
        fclose(in);
    cpu->core = core_kind(&f);
    cpu->max_mhz = cpufreq_max_mhz();
    cpu->clock_source = cpu->max_mhz > 0 ? "cpuinfo_max_freq" : f.mhz > 0 ? "cpu MHz" : "none";
    if (cpu->max_mhz <= 0)
        cpu->max_mhz = f.mhz;
}
