/* Calibration tables (calibration.h). */
#include "calibration.h"

#include <stdlib.h>
#include <string.h>

/* Larger max |x| first; the lower channel among equals. */
static int by_channel_max(const void *a, const void *b, void *ctx)
{
    const float *max = ctx;
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    if (max[x] != max[y])
        return max[x] > max[y] ? -1 : 1;
    return (x > y) - (x < y);
}

static int ascending(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int64_t llmc_act_range_hot(const llmc_act_range *r, int64_t max_hot, int64_t **out)
{
    int64_t n = 0;
    *out = malloc(sizeof **out * (size_t)(r->channels > 0 ? r->channels : 1));
    if (!*out)
        return -1;
    for (int64_t c = 0; c < r->channels; c++)
        if (r->channel_absmax[c] > r->clip)
            (*out)[n++] = c;
    if (n > max_hot) {
        qsort_r(*out, (size_t)n, sizeof **out, by_channel_max, r->channel_absmax);
        n = max_hot;
    }
    qsort(*out, (size_t)n, sizeof **out, ascending);
    return n;
}

const llmc_act_range *llmc_calibration_find(const llmc_calibration *c, const char *name)
{
    for (int i = 0; c && i < c->n; i++)
        if (!strcmp(c->ranges[i].name, name))
            return &c->ranges[i];
    return NULL;
}

void llmc_calibration_free(llmc_calibration *c)
{
    for (int i = 0; i < c->n; i++) {
        free(c->ranges[i].name);
        free(c->ranges[i].hist);
        free(c->ranges[i].channel_absmax);
    }
    free(c->ranges);
    memset(c, 0, sizeof *c);
}
