/* The input and output bindings of a lowered plan (plan_model.h).
 *
 * A role (io_roles.h, from the name) promises the runtime's LLM path a
 * dtype and rank: int64 [batch, S] ids, float [b, kv_heads, P, head_dim]
 * caches, float [b, S, vocab] logits.  The LLM path also keeps one KV slot
 * per past_key_values input, found by (role, layer), and copies each
 * present output into the slot of the past input of the same kind and
 * layer; the verifier accepts a cache binding only with layer <
 * Plan.n_layers.  A model that breaks this contract (int32 input_ids, a
 * past value without its key, a layer numbered past the count, a present
 * output with no past input) is refused here, by name, rather than written
 * as a plan the runtime rejects. */
#include "plan_model.h"

#include "ir/io_roles.h"
#include "plan_format.h"   /* role_dtype, role_rank, role_is_kv: the verifier's own */

_Static_assert((int)LLMC_ROLE_INPUT_IDS == (int)ROLE_INPUT_IDS &&
               (int)LLMC_ROLE_PAST_KEY == (int)ROLE_PAST_KEY &&
               (int)LLMC_ROLE_LOGITS == (int)ROLE_LOGITS &&
               (int)LLMC_ROLE_PRESENT_VALUE == (int)ROLE_PRESENT_VALUE,
               "io_roles.h numbers roles as the plan does");

/* KV caches Attention ops own: one per op, numbered 0 .. n-1. */
uint32_t cg_cache_count(const cg_plan *p)
{
    uint32_t n = 0;
    for (int i = 0; i < p->n_ops; i++)
        n += p->ops[i].code == LLMC_RT_OP_Attention;
    return n;
}

/* Decoder layers: those fed through past_key_values plus the fused ones. */
uint32_t cg_layer_count(const cg_plan *p)
{
    uint32_t n = cg_cache_count(p);
    for (int i = 0; i < p->n_inputs; i++)
        n += p->inputs[i].role == LLMC_ROLE_PAST_KEY;
    return n;
}

/* The binding other than `skip` with this role and layer, or -1. */
static int find_binding(const cg_binding *b, int n, int role, int layer, int skip)
{
    for (int i = 0; i < n; i++)
        if (i != skip && b[i].role == role && b[i].layer == layer)
            return i;
    return -1;
}

static int find_past(const cg_plan *p, int role, int layer)
{
    return find_binding(p->inputs, p->n_inputs, role, layer, -1);
}

static const char *binding_name(const cg_plan *p, const cg_binding *b)
{
    return p->tensors[b->tensor].name;
}

/* Past inputs: one key and one value per layer, layers below n_layers. */
static int check_past(const cg_plan *p, const cg_binding *b, uint32_t n_layers, llmc_error *err)
{
    int pair = b->role == LLMC_ROLE_PAST_KEY ? LLMC_ROLE_PAST_VALUE : LLMC_ROLE_PAST_KEY;
    if (find_past(p, pair, b->layer) < 0)
        return llmc_fail(err, LLMC_E_UNSUPPORTED, "input '%s' is the %s of cache layer %d, "
                         "but no input is its %s (past_key_values.%d.%s)", binding_name(p, b),
                         llmc_io_role_name(b->role), b->layer, llmc_io_role_name(pair), b->layer,
                         pair == LLMC_ROLE_PAST_KEY ? "key" : "value");
    if ((uint32_t)b->layer >= n_layers)
        return llmc_fail(err, LLMC_E_UNSUPPORTED, "input '%s' is cache layer %d, but the model "
                         "has %u decoder layer(s): past_key_values inputs must be numbered 0..%u",
                         binding_name(p, b), b->layer, n_layers, n_layers - 1);
    return LLMC_OK;
}

/* A present output is copied into the past input of its kind and layer. */
static int check_present(const cg_plan *p, const cg_binding *b, llmc_error *err)
{
    int past = b->role == LLMC_ROLE_PRESENT_KEY ? LLMC_ROLE_PAST_KEY : LLMC_ROLE_PAST_VALUE;
    if (find_past(p, past, b->layer) < 0)
        return llmc_fail(err, LLMC_E_UNSUPPORTED, "output '%s' is the %s of cache layer %d, "
                         "but no input is its %s: a model with a KV cache takes a "
                         "past_key_values input for every present output",
                         binding_name(p, b), llmc_io_role_name(b->role), b->layer,
                         llmc_io_role_name(past));
    return LLMC_OK;
}

static int check_type(const cg_plan *p, const cg_binding *b, const char *what, llmc_error *err)
{
    const cg_tensor *t = &p->tensors[b->tensor];
    if (b->role == LLMC_ROLE_GENERIC ||
        (t->dtype == role_dtype(b->role) && t->rank == role_rank(b->role)))
        return LLMC_OK;
    return llmc_fail(err, LLMC_E_UNSUPPORTED, "%s '%s' is %s of rank %d, but as %s the runtime "
                     "needs %s of rank %d", what, t->name, llmc_dtype_name(t->dtype), t->rank,
                     llmc_io_role_name(b->role), llmc_dtype_name(role_dtype(b->role)),
                     role_rank(b->role));
}

/* Two bindings for one slot would feed or fill it twice. */
static int check_unique(const cg_plan *p, const cg_binding *b, int n, const char *what,
                        llmc_error *err)
{
    for (int i = 0; i < n; i++) {
        int twin = role_is_kv(b[i].role) ? find_binding(b, n, b[i].role, b[i].layer, i) : -1;
        if (twin >= 0)
            return llmc_fail(err, LLMC_E_UNSUPPORTED, "%s '%s' and '%s' are both the %s of "
                             "cache layer %d", what, binding_name(p, &b[i]),
                             binding_name(p, &b[twin]), llmc_io_role_name(b[i].role), b[i].layer);
    }
    return LLMC_OK;
}

int cg_check_bindings(const cg_plan *p, llmc_error *err)
{
    uint32_t n_layers = cg_layer_count(p);
    int rc = LLMC_OK;
    for (int i = 0; !rc && i < p->n_inputs; i++)
        rc = check_type(p, &p->inputs[i], "input", err);
    for (int i = 0; !rc && i < p->n_outputs; i++)
        rc = check_type(p, &p->outputs[i], "output", err);
    if (!rc)
        rc = check_unique(p, p->inputs, p->n_inputs, "inputs", err);
    if (!rc)
        rc = check_unique(p, p->outputs, p->n_outputs, "outputs", err);
    for (int i = 0; !rc && i < p->n_inputs; i++)
        rc = role_is_kv(p->inputs[i].role) ? check_past(p, &p->inputs[i], n_layers, err) : LLMC_OK;
    for (int i = 0; !rc && i < p->n_outputs; i++)
        rc = role_is_kv(p->outputs[i].role) ? check_present(p, &p->outputs[i], err) : LLMC_OK;
    return rc;
}
