/* A calibration: the activation ranges of every Linear's input over a text,
 * what the quantize pass takes its static per-tensor scales from and the
 * shadow-outliers pass its hot channels (compiler/tools/calibrate.h runs the
 * model to fill one). */
#ifndef LLMC_CALIBRATION_H
#define LLMC_CALIBRATION_H

#include <stdint.h>

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

/* The range recorded for tensor `name`, or NULL. */
const llmc_act_range *llmc_calibration_find(const llmc_calibration *c, const char *name);

/* The "hot" channels of r (paper 003 §3.3: outliers gather in a few
 * channels): those whose max |x| passed the clip, at most max_hot of them
 * (the largest max |x| first), ascending, into a malloc'ed *out; their
 * count, or -1 on OOM. */
int64_t llmc_act_range_hot(const llmc_act_range *r, int64_t max_hot, int64_t **out);

void llmc_calibration_free(llmc_calibration *c);

#endif
