/* The reference delegate's kernels (ref_graph.h): a step of a prepared
 * graph on its tensors.  Built with -O3 (the Makefile): gcc vectorizes the
 * int8 dot products. */
#include <math.h>
#include <string.h>

#include "ref_graph.h"

static const void *read_of(const ref_graph *g, uint32_t t)
{
    const ref_tensor *x = &g->tensors[t];
    return t < g->n_io ? g->io[t] : x->weight ? x->weight : x->own;
}

static void *write_of(const ref_graph *g, uint32_t t)
{
    return t < g->n_io ? g->io[t] : g->tensors[t].own;
}

/* Over the last axis; sums in double (a reference, not a fast kernel). */
void ref_run_norm(const ref_graph *g, const ref_step *s)
{
    const ref_tensor *X = &g->tensors[s->in[0]];
    const float *x = read_of(g, s->in[0]), *scale = read_of(g, s->in[1]);
    bool layer = s->code == LLMC_RT_OP_LayerNorm;
    const float *bias = layer && s->n_in > 2 ? read_of(g, s->in[2]) : NULL;
    const float *residual = !layer && s->n_in > 2 ? read_of(g, s->in[2]) : NULL;
    float *y = write_of(g, s->out[0]);
    int64_t d = X->cols;
    for (int64_t r = 0; r < X->rows && d; r++, x += d, y += d) {
        double mean = 0, sq = 0;
        if (layer) {
            for (int64_t j = 0; j < d; j++)
                mean += x[j];
            mean /= (double)d;
        }
        for (int64_t j = 0; j < d; j++)
            sq += (x[j] - mean) * (x[j] - mean);
        float inv = (float)(1.0 / sqrt(sq / (double)d + s->epsilon));
        for (int64_t j = 0; j < d; j++) {
            float v = (float)(x[j] - mean) * inv * scale[j];
            y[j] = bias ? v + bias[j] : residual ? v + residual[r * d + j] : v;
        }
    }
}

/* q = x * (1 / scale) rounded half to even (lrintf in the default rounding
 * mode) and clamped, as the CPU's QuantizeRows; a NaN becomes 127. */
void ref_run_quantize(const ref_graph *g, const ref_step *s)
{
    const float *x = read_of(g, s->in[0]);
    int8_t *q = write_of(g, s->out[0]);
    float inv = 1.0f / s->scale;
    for (int64_t i = 0; i < g->tensors[s->in[0]].count; i++) {
        float v = x[i] * inv;
        v = v < 127.0f ? v : 127.0f;
        v = v > -127.0f ? v : -127.0f;
        q[i] = (int8_t)lrintf(v);
    }
}

/* z[m][n] = sx * (sw[n] * acc) + bias[n] + residual[m][n], acc the exact
 * int32 dot product of x row m and W row n; output j takes the next
 * columns of z. */
void ref_run_linear(const ref_graph *g, const ref_step *s)
{
    const ref_tensor *X = &g->tensors[s->in[0]];
    const int8_t *qx = read_of(g, s->in[0]);
    const float *bias = s->bias ? read_of(g, s->in[2]) : NULL;
    const float *res = s->residual ? read_of(g, s->in[s->n_in - 1]) : NULL;
    float sx = s->scale;
    int64_t k = X->cols, n_all = g->tensors[s->in[1]].rows;
    for (int64_t m = 0; m < X->rows; m++) {
        const int8_t *xrow = qx + m * k;
        int64_t n = 0;
        for (uint32_t j = 0; j < s->n_out; j++) {
            int64_t cols = g->tensors[s->out[j]].cols;
            float *y = (float *)write_of(g, s->out[j]) + m * cols;
            for (int64_t c = 0; c < cols; c++, n++) {
                const int8_t *wrow = s->wq + n * k;
                int32_t acc = 0;
                for (int64_t i = 0; i < k; i++)
                    acc += (int32_t)xrow[i] * wrow[i];
                float z = sx * (s->wscale[n] * (float)acc);
                z = bias ? z + bias[n] : z;
                y[c] = res ? z + res[m * n_all + n] : z;
            }
        }
    }
}

/* b repeats over the rows of a when it holds fewer values. */
void ref_run_binary(const ref_graph *g, const ref_step *s)
{
    const float *a = read_of(g, s->in[0]), *b = read_of(g, s->in[1]);
    float *y = write_of(g, s->out[0]);
    int64_t count = g->tensors[s->in[0]].count, inner = g->tensors[s->in[1]].count;
    for (int64_t r = 0; inner && r < count; r += inner)
        s->binary(a + r, 1, b, 1, y + r, inner);
}

void ref_run_unary(const ref_graph *g, const ref_step *s)
{
    s->unary(read_of(g, s->in[0]), write_of(g, s->out[0]), g->tensors[s->in[0]].count);
}

/* The same float32 values under other dims. */
void ref_run_reshape(const ref_graph *g, const ref_step *s)
{
    memmove(write_of(g, s->out[0]), read_of(g, s->in[0]),
            (size_t)g->tensors[s->in[0]].count * 4u);
}

void ref_graph_run(const ref_graph *g)
{
    for (uint32_t i = 0; i < g->n_steps; i++)
        g->steps[i].run(g, &g->steps[i]);
}
