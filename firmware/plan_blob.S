/* The plan, linked into flash as read-only bytes and used in place.
 * LLMC_PLAN_FILE is the compiled plan's path (the build passes it).  64:
 * the weight segments lie at 64-byte multiples from the plan's start, so
 * they land on cache lines; the runtime needs 8 (LLMC_RT_PLAN_ALIGN). */
    .section .llmc_plan, "a"
    .balign 64
    .global llmc_plan_start
    .global llmc_plan_end
llmc_plan_start:
    .incbin LLMC_PLAN_FILE
llmc_plan_end:
