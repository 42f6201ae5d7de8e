/* What a graph input/output means to the LLM runtime, from its name.
 * Values match llmc.plan.IoRole in schemas/plan.fbs. */
#ifndef LLMC_IO_ROLES_H
#define LLMC_IO_ROLES_H

enum {
    LLMC_ROLE_GENERIC = 0,
    LLMC_ROLE_INPUT_IDS,
    LLMC_ROLE_ATTENTION_MASK,
    LLMC_ROLE_POSITION_IDS,
    LLMC_ROLE_PAST_KEY,
    LLMC_ROLE_PAST_VALUE,
    LLMC_ROLE_LOGITS,
    LLMC_ROLE_PRESENT_KEY,
    LLMC_ROLE_PRESENT_VALUE,
};

/* Recognizes the names torch and Hugging Face exports use: input_ids,
 * attention_mask, position_ids, past_key_values.N.key|value (also
 * past.N.key|value), logits, present.N.key|value (also present_key_values.N.*).
 * Returns the role; *layer gets N for cache roles, -1 otherwise. */
int llmc_io_role(const char *name, int is_output, int *layer);
const char *llmc_io_role_name(int role);

#endif
