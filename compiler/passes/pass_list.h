/* The descriptor each pass file exports; pipeline.c orders them. */
#ifndef LLMC_PASS_LIST_H
#define LLMC_PASS_LIST_H

#include "pass.h"

/* Every pass, one descriptor per file in passes/. */
extern const llmc_pass llmc_pass_shape_inference;
extern const llmc_pass llmc_pass_quantize;
extern const llmc_pass llmc_pass_shadow_outliers;
extern const llmc_pass llmc_pass_npu_partition;
extern const llmc_pass llmc_pass_quantize_embedding;
extern const llmc_pass llmc_pass_logits_last;
extern const llmc_pass llmc_pass_lora_reorder;
extern const llmc_pass llmc_pass_constant_folding;
extern const llmc_pass llmc_pass_dead_code;
extern const llmc_pass llmc_pass_identity;
extern const llmc_pass llmc_pass_cse;
extern const llmc_pass llmc_pass_gemm_unflatten;
extern const llmc_pass llmc_pass_packed_split;
extern const llmc_pass llmc_pass_slice_fusion;
extern const llmc_pass llmc_pass_layernorm_fusion;
extern const llmc_pass llmc_pass_rmsnorm_fusion;
extern const llmc_pass llmc_pass_activation_fusion;
extern const llmc_pass llmc_pass_rope_fusion;
extern const llmc_pass llmc_pass_attention_fusion;
extern const llmc_pass llmc_pass_linear_fusion;
extern const llmc_pass llmc_pass_quant_canonical;

#endif
