/* The `llmc` command line: one function per command (compiler/cmd_*.c). */
#ifndef LLMC_CLI_H
#define LLMC_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "support/diag.h"
#include "support/file_map.h"
#include "llmc_rt_internal.h"
#include "support/limits.h"
#include "support/out_file.h"
#include "support/version.h"

int llmc_cmd_compile(int argc, char **argv);
int llmc_cmd_inspect(int argc, char **argv);
int llmc_cmd_run(int argc, char **argv);
int llmc_cmd_verify(int argc, char **argv);
int llmc_cmd_check_onnx(int argc, char **argv);
int llmc_cmd_ops(int argc, char **argv);
int llmc_cmd_tune(int argc, char **argv);
int llmc_cmd_bench(int argc, char **argv);
int llmc_cmd_tokenize(int argc, char **argv);
int llmc_cmd_eval(int argc, char **argv);

/* Prints "llmc: error: <msg>" to stderr and returns the status code. */
int llmc_cli_report(const llmc_error *err);
/* Usage error: prints the message and a pointer to --help; returns LLMC_E_USAGE. */
int llmc_cli_usage(const char *command, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* True if argv[i] is --help or -h. */
int llmc_cli_wants_help(int argc, char **argv);
/* Parses a non-negative integer option value; returns -1 if malformed. */
int64_t llmc_cli_parse_count(const char *text);
/* --threads N (1..LLMC_MAX_THREADS) of `command`; a usage error if not. */
int llmc_cli_parse_threads(const char *command, const char *text, uint32_t *threads);
/* The plan target this machine runs best (compile's default --target). */
const char *llmc_cli_host_target(void);

/* Prints s to stdout as a JSON string (quotes, backslashes and control
 * characters escaped). */
void llmc_cli_json_string(const char *s);

/* With isa (NULL: nothing to do), an opened plan runs the table of its
 * target whose rt_kernels.isa that is (`--isa`: the AVX2 kernels on a CPU
 * that would pick the AVX-512 ones, say); a usage error naming the tables
 * there are otherwise. */
int llmc_cli_use_isa(llmc_rt_plan *plan, const char *isa, const char *path, llmc_error *err);

#endif
