#include "cli.h"
#include "kernels/kernel_table.h"
#include "plan_format.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int llmc_cli_report(const llmc_error *err)
{
    fprintf(stderr, "llmc: error: %s\n", err->msg[0] ? err->msg : llmc_status_name(err->code));
    return err->code;
}

int llmc_cli_usage(const char *command, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "llmc %s: ", command);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n(see 'llmc %s --help')\n", command);
    va_end(ap);
    return LLMC_E_USAGE;
}

int llmc_cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return 1;
    return 0;
}

int64_t llmc_cli_parse_count(const char *text)
{
    if (!text || !*text)
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (*end || errno || v < 0)
        return -1;
    return v;
}

int llmc_cli_parse_threads(const char *command, const char *text, uint32_t *threads)
{
    int64_t v = llmc_cli_parse_count(text);
    if (v < 1 || v > LLMC_MAX_THREADS)
        return llmc_cli_usage(command, "--threads wants an integer in 1..%d, got '%s'",
                              LLMC_MAX_THREADS, text);
    *threads = (uint32_t)v;
    return LLMC_OK;
}



int llmc_cli_use_isa(llmc_rt_plan *plan, const char *isa, const char *path, llmc_error *err)
{
    llmc_rt_error rt = {0};
    if (isa && llmc_rt_plan_use_kernels(plan, isa, &rt) != LLMC_RT_OK)
        return llmc_fail(err, LLMC_E_USAGE, "'%s': --isa: %s", path, rt.msg);
    return LLMC_OK;
}

const char *llmc_cli_host_target(void)
{
    /* plan_enums.h lists targets from the most portable to the most capable:
     * the last this runtime was built with and this CPU runs */
    for (int i = TARGET_COUNT - 1; i > 0; i--)
        if (rt_kernels_for_target(rt_target_info_of(i)->name, NULL))
            return rt_target_info_of(i)->name;
    return "generic";
}

void llmc_cli_json_string(const char *s)
{
    putchar('"');
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}
