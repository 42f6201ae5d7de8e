/* llmc-run: `llmc run` alone, for machines that execute plans but never
 * compile them (the AArch64 Linux build: no protobuf-c, no ONNX importer).
 * The same command, options and output as `llmc run`. */
#include "cli.h"

int main(int argc, char **argv)
{
    return llmc_cmd_run(argc, argv);
}
