/* llmc verify PLAN: the runtime's verifier plus every weight segment hash. */
#include <stdio.h>

#include "cli.h"
#include "kernels/kernel_table.h"
#include "llmc_rt.h"
#include "llmc_rt_internal.h"

int llmc_cmd_verify(int argc, char **argv)
{
    if (llmc_cli_wants_help(argc, argv)) {
        printf("usage: llmc verify PLAN\n\nRuns the runtime's plan verifier (every offset, index and region)\n"
               "and checks the xxHash64 of every weight segment.  Exit 0 if the plan is sound, 6 if not.\n");
        return 0;
    }
    if (argc != 2 || argv[1][0] == '-')
        return llmc_cli_usage("verify", argc < 2 ? "missing PLAN" : "unexpected argument '%s'", argv[argc - 1]);
    llmc_error err = {0};
    llmc_mapped_file file;
    int rc = llmc_open_input(argv[1], false, &file, &err);
    if (rc)
        return llmc_cli_report(&err);
    llmc_rt_plan plan;
    llmc_rt_error rt = {0};
    llmc_rt_status st = llmc_rt_plan_open(&plan, file.map, file.size,
                                          LLMC_RT_VERIFY_HASHES | LLMC_RT_OPEN_ANY_TARGET, &rt);
    if (st != LLMC_RT_OK) {
        llmc_fail(&err, LLMC_E_RUNTIME, "'%s': %s: %s", argv[1], llmc_rt_status_text(st), rt.msg);
    } else {
        printf("%s: ok (%u tensors, %u ops, %u weight segments hashed, arena %llu bytes)\n", argv[1],
               rt_plan_of(&plan)->n_tensors, rt_plan_of(&plan)->n_ops, rt_plan_of(&plan)->n_segments, (unsigned long long)rt_plan_of(&plan)->arena_size);
        if (rt_plan_of(&plan)->kernels || rt_kernels_for_target(rt_plan_of(&plan)->target, &rt))
            printf("target %s: runs on this machine\n", rt_plan_of(&plan)->target);
        else
            printf("target %s: verified, but cannot run here: %s\n", rt_plan_of(&plan)->target, rt.msg);
    }
    llmc_unmap_file(&file);
    return err.code ? llmc_cli_report(&err) : 0;
}
