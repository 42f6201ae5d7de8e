/* llmc: ahead-of-time compiler for decoder-only LLMs (ONNX -> plan). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "plan_format.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"compile", llmc_cmd_compile, "compile an ONNX model into a plan"},
    {"inspect", llmc_cmd_inspect, "describe a plan: ops, tensors, weights, arena, passes"},
    {"run", llmc_cmd_run, "generate tokens greedily with a plan"},
    {"bench", llmc_cmd_bench, "measure prefill/decode tok/s of a plan (--roofline: against this machine's peaks)"},
    {"eval", llmc_cmd_eval, "perplexity of a token sequence with sliding windows"},
    {"verify", llmc_cmd_verify, "check a plan's structure and every weight hash"},
    {"tune", llmc_cmd_tune, "measure the GEMV/GEMM crossover here and write it into a plan"},
    {"tokenize", llmc_cmd_tokenize, "text to token ids (or --ids back) with a plan's tokenizer or a tokenizer.json"},
    {"check-onnx", llmc_cmd_check_onnx, "run an ONNX backend test case and compare outputs"},
    {"ops", llmc_cmd_ops, "list the ONNX operators llmc compiles"},
};

static void print_help(FILE *f)
{
    fprintf(f, "usage: llmc <command> [options]   (llmc <command> --help for details)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        fprintf(f, "  %-11s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nexit codes: 0 ok, 1 internal error, 2 usage, 3 bad input file, 4 unsupported model,\n"
               "            5 cannot write output, 6 runtime error, 7 check-onnx mismatch, 8 out of memory\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        print_help(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        print_help(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("llmc %s (plan format %u, targets%s)\n", LLMC_VERSION, LLMC_RT_FORMAT_VERSION,
               RT_TARGET_NAMES);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "llmc: unknown command '%s' (see 'llmc --help')\n", argv[1]);
    return 2;
}
