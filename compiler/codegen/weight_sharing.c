/* One segment per distinct weight: weight tensors whose bytes are identical
 * share the first one's segment.  A model with tied embeddings (GPT-2,
 * Qwen2-0.5B: the LM head is the token embedding) holds the matrix once for
 * the Gather and once, transposed, for the LM head's MatMul; Linear stores
 * its W transposed back to [N, K], which is the embedding's own [V, H]
 * layout, so both tensors read one segment and the plan carries the matrix
 * once.  Equal bytes are what make sharing exact, whatever the dims.
 *
 * Weights are sorted by (size, producer, source bytes, tensor index), so
 * equal weights sit side by side.  No hash: the plan writer hashes every
 * segment anyway, and the comparison stops at the first differing chunk,
 * which for two different weights of one size comes early (a lazy weight,
 * a transposed view, is read a chunk at a time: llmc_const_compare).
 * Weights made by a producer (quantized, packed) are equal when the
 * producer, its argument and the source matrices are.  Segments are then
 * renumbered in the order of the tensors that own them, so the plan's bytes
 * stay a function of the graph. */
#include <stdlib.h>
#include <string.h>

#include "plan_model.h"
#include "segment_writer.h"

typedef struct {
    const cg_tensor *t;
    int index;
} weight_ref;

/* Orders pointers (the producer, its argument) only to group equal ones:
 * which group comes first never reaches the plan (see above). */
static int pointer_cmp(const void *a, const void *b)
{
    return (uintptr_t)a < (uintptr_t)b ? -1 : (uintptr_t)a > (uintptr_t)b;
}

static int same_size_cmp(const weight_ref *x, const weight_ref *y)
{
    if (x->t->nbytes != y->t->nbytes)
        return x->t->nbytes < y->t->nbytes ? -1 : 1;
    int c = pointer_cmp((const void *)(uintptr_t)x->t->produce, (const void *)(uintptr_t)y->t->produce);
    if (!c)
        c = pointer_cmp(x->t->produce_arg, y->t->produce_arg);
    if (c)
        return c;
    llmc_const a = cg_weight_source(x->t), b = cg_weight_source(y->t);
    return llmc_const_compare(&a, &b);
}

static int by_content_then_index(const void *a, const void *b)
{
    const weight_ref *x = a, *y = b;
    int c = same_size_cmp(x, y);
    return c ? c : (x->index > y->index) - (x->index < y->index);
}

/* Every weight tensor takes the segment of the lowest-index tensor with its
 * bytes (the first of its run); segment numbers then follow tensor order. */
static void assign_segments(cg_plan *p, const weight_ref *sorted, int n, int *owner)
{
    for (int i = 0, first = 0; i < n; i++) {
        if (i > 0 && same_size_cmp(&sorted[i - 1], &sorted[i]) != 0)
            first = i;
        owner[sorted[i].index] = sorted[first].index;
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
    weight_ref *refs = malloc(sizeof *refs * ((size_t)p->n_tensors + 1));
    int *owner = malloc(sizeof *owner * ((size_t)p->n_tensors + 1));
    int n = 0;
    if (!refs || !owner) {
        free(refs);
        free(owner);
        return llmc_fail(err, LLMC_E_NOMEM, "codegen: out of memory sharing weights");
    }
    for (int t = 0; t < p->n_tensors; t++)
        if (p->tensors[t].is_weight)
            refs[n++] = (weight_ref){&p->tensors[t], t};
    qsort(refs, (size_t)n, sizeof *refs, by_content_then_index);
    assign_segments(p, refs, n, owner);
    free(refs);
    free(owner);
    return LLMC_OK;
}
