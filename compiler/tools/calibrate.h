/* Calibration: the activation ranges of every Linear's input over a text
 * (llmc compile --calibrate FILE) or token ids (--calibrate-ids FILE), from
 * which the quantize pass gives each QuantizeRows one static per-tensor
 * scale, the form an NPU runs (paper 003 §3.3: per-tensor W8A8, the scale
 * from profiling a corpus offline).
 *
 * The model is compiled without quantization to a plan in memory, run by
 * the runtime over windows of the tokenized text (or of the ids), and an
 * op observer reads each Linear's input x before the op runs.  Per tensor it keeps max |x|
 * and a histogram of |x|, whose percentile is the clip: scale = clip / 127.
 * Values beyond the clip are the outliers (their share and the importance
 * max |x| / clip, paper 003 §3.3, are reported). */
#ifndef LLMC_CALIBRATE_H
#define LLMC_CALIBRATE_H

#include <stdint.h>
#include <stdio.h>

#include "support/diag.h"
#include "onnx/onnx_import.h"
#include "passes/calibration.h"
#include "passes/pass.h"
#include "llmc_rt.h"

typedef struct {
    const char *text;       /* the calibration text, or NULL: */
    const char *ids;        /* a file of token ids, one window per line */
    double percentile;      /* of |x| per tensor, in (0, 100] */
    uint32_t context;       /* window length in tokens (a longer line: several windows) */
    const char *target;     /* kernels the calibration plan runs on (the host's) */
} llmc_calibrate_options;

/* Imports `model` (with io's bindings), runs the pass pipeline of ctx
 * without quantization, builds that plan with the compiled tokenizer and
 * runs it over opt->text, cut into windows of opt->context tokens, or over
 * each line of opt->ids cut likewise: every Linear's input range into
 * *out. */
int llmc_calibrate(const char *model, const llmc_import_options *io, const llmc_pass_ctx *ctx,
                   const uint8_t *tokenizer, size_t tokenizer_size,
                   const llmc_calibrate_options *opt, llmc_calibration *out, llmc_error *err);

/* The calibration run of llmc_calibrate on a plan already open (the
 * unquantized plan, with the tokenizer opt->text needs): reads opt->text or
 * opt->ids (text_ids.h), refuses an input without tokens, runs the windows
 * and fills *out (nothing to free on failure). */
int llmc_calibrate_plan(const llmc_rt_plan *plan, const llmc_calibrate_options *opt,
                        llmc_calibration *out, llmc_error *err);

/* A table of the ranges (tensor, max |x|, clip, scale, outliers, importance). */
void llmc_calibration_print(const llmc_calibration *c, FILE *out);


#endif
