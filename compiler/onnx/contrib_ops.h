/* The operators of other domains llmc imports: ONNX Runtime's contrib ops
 * (domain com.microsoft, and the ones ONNX Runtime registers in the default
 * domain although the ONNX standard has no such op).  Files written by
 * onnxruntime-genai's model builder and by ONNX Runtime's quantizers use
 * them.
 *
 * No pass ever sees one: the importer expands each node into default-domain
 * ONNX nodes (contrib_expand.h) right after reading the graph, into the
 * forms torch's exports have, so the one canonical form every fusion
 * matches covers these files too.  Nodes an expansion adds carry opset
 * LLMC_EXPAND_OPSET whatever the model imports, so their semantics are
 * fixed.
 *
 * LLMC_CONTRIB_OP_LIST: X(domain, op, min inputs, max inputs, min outputs,
 *                         max outputs, expander, attributes)
 *   domain      ONNX (the default domain) or MS (com.microsoft);
 *   counts      as ONNX Runtime's ContribOperators.md states them (inputs
 *               count empty names of omitted optional inputs);
 *   expander    the function (contrib_expand.h) that rewrites the node;
 *   attributes  every attribute name the expander reads, space-separated:
 *               any other attribute is refused by name, so a semantics
 *               llmc does not implement never passes silently. */
#ifndef LLMC_CONTRIB_OPS_H
#define LLMC_CONTRIB_OPS_H

#include <stdbool.h>

#define LLMC_CONTRIB_DOMAIN_ONNX ""
#define LLMC_CONTRIB_DOMAIN_MS "com.microsoft"
#define LLMC_EXPAND_OPSET 17

#define LLMC_CONTRIB_OP_LIST(X)                                                                   \
    X(ONNX, SimplifiedLayerNormalization, 2, 2, 1, 2, expand_simplified_layer_norm,             \
      "axis epsilon stash_type")                                                                \
    X(MS, SkipSimplifiedLayerNormalization, 3, 4, 1, 4, expand_skip_simplified_layer_norm,      \
      "epsilon")                                                                                \
    X(MS, SkipLayerNormalization, 3, 5, 1, 4, expand_skip_layer_norm, "epsilon")                 \
    X(MS, FastGelu, 1, 2, 1, 1, expand_fast_gelu, "")                                           \
    X(MS, RotaryEmbedding, 4, 4, 1, 1, expand_rotary_embedding,                                 \
      "interleaved num_heads rotary_embedding_dim scale is_packed_batching")                    \
    X(MS, GroupQueryAttention, 7, 16, 3, 4, expand_group_query_attention,                       \
      "num_heads kv_num_heads scale do_rotary rotary_interleaved local_window_size softcap "    \
      "smooth_softmax qk_output")                                                               \
    X(MS, MatMulNBits, 3, 6, 1, 1, expand_matmul_nbits, "K N bits block_size accuracy_level")   \
    X(MS, GatherBlockQuantized, 3, 4, 1, 1, expand_gather_block_quantized,                      \
      "gather_axis quantize_axis block_size bits")

typedef struct {
    const char *domain, *name;
    int min_inputs, max_inputs, min_outputs, max_outputs;
    const char *attributes;
} llmc_contrib_op_info;

/* The entry of op `op_type` of `domain` ("ai.onnx" is ""), or NULL. */
const llmc_contrib_op_info *llmc_contrib_op_find(const char *domain, const char *op_type);
/* Entry i of the list (for `llmc ops`), NULL past its end. */
const llmc_contrib_op_info *llmc_contrib_op_at(int i);

#endif
