/* Which decoder layer an op belongs to, from the ONNX node name it carries.
 * torch names nodes after the module path ("/model/layers.3/mlp/...",
 * "/h.11/attn/..."), and fused ops keep the name of the node they grew
 * from, so the first path component of the form <word>.<number> is the
 * layer index. */
#ifndef LLMC_LAYER_NAME_H
#define LLMC_LAYER_NAME_H

#include <stdint.h>

/* The layer index named in `name`, or -1 when it names none. */
int64_t llmc_layer_of_name(const char *name);

/* Per-layer op counts: feed every op name, then read the result. */
#define LLMC_LAYER_TALLY_MAX 1024
typedef struct {
    uint32_t ops[LLMC_LAYER_TALLY_MAX];
    int64_t n_layers;       /* highest layer index seen + 1 */
} llmc_layer_tally;

void llmc_layer_tally_add(llmc_layer_tally *t, const char *op_name);
/* A model's decoder layers are its KV-cache layers (n_layers > 0): ops
 * named past them are not a layer of their own (onnxruntime-genai's builder
 * names the final norm /model/layers.<n_layers>/final_norm_layernorm). */
void llmc_layer_tally_limit(llmc_layer_tally *t, int64_t n_layers);
/* Largest and smallest op count over layers 0 .. n_layers-1 (0, 0 if none). */
void llmc_layer_tally_range(const llmc_layer_tally *t, uint32_t *min, uint32_t *max);

#endif
