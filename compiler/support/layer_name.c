/* Layer index from an op's node name (layer_name.h). */
#include "layer_name.h"

#include <ctype.h>
#include <string.h>

/* "<word>.<digits>" ending at '/' or the end of the string, starting at p. */
static int64_t component_index(const char *start)
{
    const char *p = start, *dot = NULL;
    for (; *p && *p != '/'; p++) {
        if (*p == '.')
            dot = p;
        else if (dot && !isdigit((unsigned char)*p))
            return -1;
        else if (!dot && !isalnum((unsigned char)*p) && *p != '_')
            return -1;
    }
    if (!dot || dot == start || !isdigit((unsigned char)dot[1]))
        return -1;
    int64_t n = 0;
    for (const char *d = dot + 1; d < p; d++) {
        n = n * 10 + (*d - '0');
        if (n >= LLMC_LAYER_TALLY_MAX)
            return -1;
    }
    return n;
}

int64_t llmc_layer_of_name(const char *name)
{
    for (const char *p = name; p && *p; p++) {
        if (*p != '/')
            continue;
        int64_t n = component_index(p + 1);
        if (n >= 0)
            return n;
    }
    return -1;
}

void llmc_layer_tally_add(llmc_layer_tally *t, const char *op_name)
{
    int64_t layer = llmc_layer_of_name(op_name);
    if (layer < 0)
        return;
    t->ops[layer]++;
    if (layer + 1 > t->n_layers)
        t->n_layers = layer + 1;
}

void llmc_layer_tally_limit(llmc_layer_tally *t, int64_t n_layers)
{
    if (n_layers > 0 && t->n_layers > n_layers)
        t->n_layers = n_layers;
}

void llmc_layer_tally_range(const llmc_layer_tally *t, uint32_t *min, uint32_t *max)
{
    *min = *max = 0;
    for (int64_t i = 0; i < t->n_layers; i++) {
        if (i == 0 || t->ops[i] < *min)
            *min = t->ops[i];
        if (t->ops[i] > *max)
            *max = t->ops[i];
    }
}
