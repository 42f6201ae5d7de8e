/* Calibration: the activation ranges of every Linear's input over a text
 * (llmc compile --calibrate FILE), from which the quantize pass gives each
 * QuantizeRows one static per-tensor scale, the form an NPU runs (paper 003
 * §3.3: per-tensor W8A8, the scale from profiling a corpus offline).
 *
 * The model is compiled without quantization to a plan in memory, run by
 * the runtime over windows of the tokenized text, and an op observer reads
 * each Linear's input x before the op runs.  Per tensor it keeps max |x|
 * and a histogram of |x|, whose percentile is the clip: scale = clip / 127.
 * Values beyond the clip are the outliers (their share and the importance
 * max |x| / clip, paper 003 §3.3, are reported). */
#ifndef LLMC_CALIBRATE_H
#define LLMC_CALIBRATE_H

#include <stdint.h>
#include <stdio.h>

#include "support/diag.h"
#include "onnx/onnx_import.h"
#include "passes/pass.h"

/* |x| histogram: CALIB_SUB bins per power of two over 2^CALIB_MIN_EXP ..
 * 2^(CALIB_MIN_EXP + CALIB_OCTAVES), bin 0 for 0 and below, the last for
 * above (a clip is a bin's upper edge: within 1/CALIB_SUB of an octave). */
#define CALIB_SUB 32
#define CALIB_MIN_EXP (-40)
#define CALIB_OCTAVES 80
#define CALIB_BINS (CALIB_SUB * CALIB_OCTAVES + 2)

typedef struct {
    char *name;             /* the tensor: the Linear's input x (an IR value name) */
    double absmax;          /* max |x| seen */
    uint64_t count;         /* values seen */
    uint64_t *hist;         /* CALIB_BINS counts of |x| */
    float clip;             /* |x| at the percentile: values beyond it are outliers */
    float scale;            /* clip / 127: QuantizeRows' static scale */
    uint64_t beyond;        /* values with |x| > clip */
    float *channel_absmax;  /* max |x| of each channel (x's last axis) */
    int64_t channels;       /* 0 until the first values */
} llmc_act_range;

typedef struct llmc_calibration {
    llmc_act_range *ranges; /* in the order the model first reads them */
    int n, cap;
    uint64_t tokens;        /* tokens the windows ran */
    uint32_t windows, context;
    double percentile;
} llmc_calibration;

typedef struct {
    const char *text;       /* the calibration text */
    double percentile;      /* of |x| per tensor, in (0, 100] */
    uint32_t context;       /* window length in tokens */
    const char *target;     /* kernels the calibration plan runs on (the host's) */
} llmc_calibrate_options;

/* Imports `model` (with io's bindings), runs the pass pipeline of ctx
 * without quantization, builds that plan with the compiled tokenizer and
 * runs it over opt->text: every Linear's input range into *out. */
int llmc_calibrate(const char *model, const llmc_import_options *io, const llmc_pass_ctx *ctx,
                   const uint8_t *tokenizer, size_t tokenizer_size,
                   const llmc_calibrate_options *opt, llmc_calibration *out, llmc_error *err);

/* The range recorded for tensor `name`, or NULL. */
const llmc_act_range *llmc_calibration_find(const llmc_calibration *c, const char *name);

/* The "hot" channels of r (paper 003 §3.3: outliers gather in a few
 * channels): those whose max |x| passed the clip, at most max_hot of them
 * (the largest max |x| first), ascending, into a malloc'ed *out; their
 * count, or -1 on OOM. */
int64_t llmc_act_range_hot(const llmc_act_range *r, int64_t max_hot, int64_t **out);

/* A table of the ranges (tensor, max |x|, clip, scale, outliers, importance). */
void llmc_calibration_print(const llmc_calibration *c, FILE *out);

void llmc_calibration_free(llmc_calibration *c);

#endif
