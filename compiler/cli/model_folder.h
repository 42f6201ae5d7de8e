/* A model folder as downloaded from the Hugging Face Hub (llmc compile
 * FOLDER): which ONNX file to compile, and the tokenizer.json that goes
 * with it.
 *
 * Layouts, searched in this order:
 *   onnxruntime-genai  FOLDER/genai_config.json names the file
 *                      (model.decoder.filename), usually model.onnx
 *   optimum            FOLDER/model.onnx, or the legacy
 *                      decoder_model_merged.onnx, decoder_with_past_model.onnx
 *                      and decoder_model.onnx
 *   transformers.js    FOLDER/onnx/model.onnx and model_<variant>.onnx
 *                      (fp16, q4, q4f16, quantized, int8, uint8, bnb4), or
 *                      the legacy decoder_*.onnx names, possibly with a suffix
 * External data files (model.onnx_data, model.onnx.data, ..._data_1) stay
 * beside their model, where the importer looks for them.
 *
 * Every *.onnx file of FOLDER and FOLDER/onnx is a candidate, named by its
 * variant: "fp32" for model.onnx, X for model_X.onnx, and for the legacy
 * decoders merged[_X], with_past[_X] and no_past[_X].  A
 * decoder_with_past_model[_X].onnx is the one to compile among the legacy
 * files of its suffix: decoder_model[_X] is its first step without a KV
 * cache, decoder_model_merged[_X] the two in one graph behind an If (which
 * llmc does not import); those two are still there for --variant.  The
 * folder's model is the one candidate left, or the --variant one; several
 * and no --variant is refused, listing them.  Names are sorted, so the
 * choice never depends on the order a directory lists its files in. */
#ifndef LLMC_MODEL_FOLDER_H
#define LLMC_MODEL_FOLDER_H

#include <stdbool.h>

#include "support/diag.h"

#define LLMC_FOLDER_PATH 4096

typedef struct {
    char model[LLMC_FOLDER_PATH];      /* the ONNX file chosen */
    char variant[256];                 /* its variant name */
    const char *layout;                /* "onnxruntime-genai", "optimum", "transformers.js" */
    char tokenizer[LLMC_FOLDER_PATH];  /* tokenizer.json beside it, or "" */
} llmc_model_folder;

/* True if path names a directory (following symlinks). */
bool llmc_is_folder(const char *path);

/* Chooses the model of `folder` (variant: --variant, NULL if not given)
 * into *out.  LLMC_E_INPUT when the folder holds no ONNX model (naming the
 * layouts searched) or genai_config.json is unreadable; LLMC_E_USAGE when
 * several are there and no variant picks one, or the variant names none
 * (both list the candidates and the --variant values that select them). */
int llmc_model_folder_find(const char *folder, const char *variant, llmc_model_folder *out,
                           llmc_error *err);

#endif
