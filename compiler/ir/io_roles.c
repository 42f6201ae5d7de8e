#include "io_roles.h"

#include <stdlib.h>
#include <string.h>

/* Parses "<prefix><N>.<key|value>" and returns the key/value role. */
static int cache_role(const char *name, const char *prefix, int key_role, int *layer)
{
    size_t n = strlen(prefix);
    if (strncmp(name, prefix, n) != 0)
        return -1;
    char *end;
    long l = strtol(name + n, &end, 10);
    if (end == name + n || l < 0 || l > 100000)
        return -1;
    if (strcmp(end, ".key") == 0) {
        *layer = (int)l;
        return key_role;
    }
    if (strcmp(end, ".value") == 0) {
        *layer = (int)l;
        return key_role + 1;
    }
    return -1;
}

int llmc_io_role(const char *name, int is_output, int *layer)
{
    static const char *const past[] = {"past_key_values.", "past."};
    static const char *const present[] = {"present.", "present_key_values."};
    *layer = -1;
    if (!is_output) {
        if (strcmp(name, "input_ids") == 0) return LLMC_ROLE_INPUT_IDS;
        if (strcmp(name, "attention_mask") == 0) return LLMC_ROLE_ATTENTION_MASK;
        if (strcmp(name, "position_ids") == 0) return LLMC_ROLE_POSITION_IDS;
        for (size_t i = 0; i < sizeof past / sizeof *past; i++) {
            int r = cache_role(name, past[i], LLMC_ROLE_PAST_KEY, layer);
            if (r >= 0) return r;
        }
        return LLMC_ROLE_GENERIC;
    }
    if (strcmp(name, "logits") == 0) return LLMC_ROLE_LOGITS;
    for (size_t i = 0; i < sizeof present / sizeof *present; i++) {
        int r = cache_role(name, present[i], LLMC_ROLE_PRESENT_KEY, layer);
        if (r >= 0) return r;
    }
    return LLMC_ROLE_GENERIC;
}

const char *llmc_io_role_name(int role)
{
    static const char *const names[] = {
        "generic", "input_ids", "attention_mask", "position_ids", "past_key",
        "past_value", "logits", "present_key", "present_value",
    };
    return role >= 0 && role <= LLMC_ROLE_PRESENT_VALUE ? names[role] : "?";
}
