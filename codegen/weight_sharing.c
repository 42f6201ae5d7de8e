/* One segment per distinct weight: weight tensors whose bytes are identical
 * share the first one's segment.  A model with tied embeddings (GPT-2,
 * Qwen2-0.5B: the LM head is the token embedding) holds the matrix once for
 * the Gather and once, transposed, for the LM head's MatMul; Linear stores
 * its W transposed back to [N, K], which is the embedding's own [V, H]
 * layout, so both tensors read one segment and the plan carries the matrix
 * once.  Equal bytes are what make sharing exact, whatever the dims.
 *
 * Weights are grouped by (size, XXH64) and compared byte for byte;
 * segments are then renumbered in the order of the tensors that own them,
 * so the plan's bytes stay a function of the graph. */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "plan_model.h"

typedef struct {
    uint64_t nbytes, hash;
    int tensor;
} weight_key;

static int by_content_then_index(const void *a, const void *b)
{
    const weight_key *x = a, *y = b;
    if (x->nbytes != y->nbytes)
        return x->nbytes < y->nbytes ? -1 : 1;
    if (x->hash != y->hash)
        return x->hash < y->hash ? -1 : 1;
    return (x->tensor > y->tensor) - (x->tensor < y->tensor);
}

static bool same_bytes(const cg_plan *p, const weight_key *a, const weight_key *b)
{
    return a->nbytes == b->nbytes && a->hash == b->hash &&
           memcmp(p->tensors[a->tensor].data, p->tensors[b->tensor].data, a->nbytes) == 0;
}

/* Every weight tensor takes the segment of the lowest-index tensor with its
 * bytes; segment numbers then follow tensor order from 0. */
static void assign_segments(cg_plan *p, const weight_key *keys, int n, int *owner)
{
    for (int i = 0; i < n; i++) {
        int first = i;
        while (first > 0 && same_bytes(p, &keys[first - 1], &keys[i]))
            first--;
        owner[keys[i].tensor] = keys[first].tensor;
    }
    uint32_t next = 0;
    for (int t = 0; t < p->n_tensors; t++)
        if (p->tensors[t].is_weight && owner[t] == t)
            p->tensors[t].segment = next++;
    for (int t = 0; t < p->n_tensors; t++)
        if (p->tensors[t].is_weight)
            p->tensors[t].segment = p->tensors[owner[t]].segment;
    p->n_segments = next;
}

int cg_share_weights(cg_plan *p, llmc_error *err)
{
    weight_key *keys = malloc(sizeof *keys * ((size_t)p->n_tensors + 1));
    int *owner = malloc(sizeof *owner * ((size_t)p->n_tensors + 1));
    int n = 0;
    if (!keys || !owner) {
        free(keys);
        free(owner);
        return llmc_fail(err, LLMC_E_NOMEM, "codegen: out of memory sharing weights");
    }
    for (int t = 0; t < p->n_tensors; t++)
        if (p->tensors[t].is_weight)
            keys[n++] = (weight_key){p->tensors[t].nbytes, XXH64(p->tensors[t].data, p->tensors[t].nbytes, 0), t};
    qsort(keys, (size_t)n, sizeof *keys, by_content_then_index);
    assign_segments(p, keys, n, owner);
    free(keys);
    free(owner);
    return LLMC_OK;
}
