/* The batched ReLU network's forward pass, Gaussian negative log-likelihood and hand-written
 * backward pass, fused per model so that a model's activations stay in its core's cache.
 *
 * Built and loaded by simulate/core/native/__init__.py (which documents the interface and
 * the arithmetic); the reference it is tested against is simulate.core.layout.mlp_nll_and_grad.
 *
 * Layout (the same as simulate.core.layout.Layout): layer l maps dims[l] -> dims[l + 1]; its
 * parameters are the row-major block [out][in + 1] at theta[e * ldt + off_l], the bias last.
 * Activations are feature-major, [features][mp] with mp = m rounded up to VL, so the products
 * are vectorised over the minibatch: every lane is one sample, every sum over samples is kept
 * in VL independent lanes (16 or 8, below) and added up in a fixed order at the end (no
 * reassociation is asked of the compiler; the result does not depend on the number of
 * threads).
 */
#include <math.h>
#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* VL floats per vector: 16 where the target has AVX-512 (32 vector registers of 16 floats),
 * 8 elsewhere -- a 16-float vector on AVX2 is two registers, and the products' tiles below
 * then spill (measured on an AVX2 CPU: the fused pass 2.2x slower at 16 than at 8).  The
 * sums over the minibatch are kept in VL lanes, so the results depend on VL: bit for bit the
 * same on every machine of one vector length, within float rounding between the two. */
#ifndef VL
#ifdef __AVX512F__
#define VL 16
#else
#define VL 8
#endif
#endif
typedef float vf __attribute__((vector_size(VL * sizeof(float))));
typedef int32_t vi __attribute__((vector_size(VL * sizeof(float))));

static inline vf vload(const float *p) { vf v; memcpy(&v, p, sizeof v); return v; }
static inline void vstore(float *p, vf v) { memcpy(p, &v, sizeof v); }
static inline vf vbcast(float s) { vf v = {0}; return v + s; }
/* x where keep (a lane mask of comparison results), else +0 */
static inline vf vkeep(vf x, vi keep) { return (vf)((vi)x & keep); }
/* the ReLU as torch.clamp_min(z, 0) computes it: NaN stays NaN */
static inline vf vrelu(vf z) { return vkeep(z, (z > vbcast(0.0f)) | (z != z)); }
/* the ReLU's backward as threshold_backward(g, a, 0): g where not (a <= 0), else 0 */
static inline vf vmask(vf g, vf a) { return vkeep(g, ~(a <= vbcast(0.0f))); }
static inline float hsum(vf v) {
    float s = 0.0f;
    for (int k = 0; k < VL; k++) s += v[k];
    return s;
}

/* out[o][:] = b[o] + sum_i W[o][i] a[i][:], then ReLU if relu; W's rows are ld floats
 * apart (the padded block [out][ld], its bias in the last column), of which the first in
 * are this model's inputs. */
static void layer_forward(const float *W, int ld, int in, int out, const float *a, float *z,
                          int64_t mp, int relu) {
    int o = 0;
    /* 4 outputs x 2 vectors of samples: 8 independent accumulators, enough to keep two
     * FMA pipes busy through their latency */
    for (; o + 4 <= out; o += 4) {
        const float *w0 = W + (int64_t)o * ld, *w1 = w0 + ld, *w2 = w1 + ld, *w3 = w2 + ld;
        int64_t j = 0;
        for (; j + 2 * VL <= mp; j += 2 * VL) {
            vf c0 = vbcast(w0[ld - 1]), c1 = vbcast(w1[ld - 1]), c2 = vbcast(w2[ld - 1]),
               c3 = vbcast(w3[ld - 1]);
            vf d0 = c0, d1 = c1, d2 = c2, d3 = c3;
            for (int i = 0; i < in; i++) {
                vf x = vload(a + i * mp + j), y = vload(a + i * mp + j + VL);
                c0 += w0[i] * x;
                c1 += w1[i] * x;
                c2 += w2[i] * x;
                c3 += w3[i] * x;
                d0 += w0[i] * y;
                d1 += w1[i] * y;
                d2 += w2[i] * y;
                d3 += w3[i] * y;
            }
            if (relu) {
                c0 = vrelu(c0), c1 = vrelu(c1), c2 = vrelu(c2), c3 = vrelu(c3);
                d0 = vrelu(d0), d1 = vrelu(d1), d2 = vrelu(d2), d3 = vrelu(d3);
            }
            vstore(z + (o + 0) * mp + j, c0);
            vstore(z + (o + 1) * mp + j, c1);
            vstore(z + (o + 2) * mp + j, c2);
            vstore(z + (o + 3) * mp + j, c3);
            vstore(z + (o + 0) * mp + j + VL, d0);
            vstore(z + (o + 1) * mp + j + VL, d1);
            vstore(z + (o + 2) * mp + j + VL, d2);
            vstore(z + (o + 3) * mp + j + VL, d3);
        }
        for (; j < mp; j += VL) {
            vf c0 = vbcast(w0[ld - 1]), c1 = vbcast(w1[ld - 1]), c2 = vbcast(w2[ld - 1]),
               c3 = vbcast(w3[ld - 1]);
            for (int i = 0; i < in; i++) {
                vf x = vload(a + i * mp + j);
                c0 += w0[i] * x;
                c1 += w1[i] * x;
                c2 += w2[i] * x;
                c3 += w3[i] * x;
            }
            if (relu) c0 = vrelu(c0), c1 = vrelu(c1), c2 = vrelu(c2), c3 = vrelu(c3);
            vstore(z + (o + 0) * mp + j, c0);
            vstore(z + (o + 1) * mp + j, c1);
            vstore(z + (o + 2) * mp + j, c2);
            vstore(z + (o + 3) * mp + j, c3);
        }
    }
    for (; o < out; o++) {
        const float *w0 = W + (int64_t)o * ld;
        for (int64_t j = 0; j < mp; j += VL) {
            vf c0 = vbcast(w0[ld - 1]);
            for (int i = 0; i < in; i++) c0 += w0[i] * vload(a + i * mp + j);
            if (relu) c0 = vrelu(c0);
            vstore(z + o * mp + j, c0);
        }
    }
}

/* One tile of the weight gradient: t[r][c] = sum_j g[r][j] rows[c][j] for r < NO, c < NI
 * (constants where it is called, so the NO x NI accumulators live in registers). */
static inline __attribute__((always_inline)) void wg_tile(const float *g, int64_t mp,
                                                         const float *const *rows, int NO,
                                                         int NI, float t[4][4]) {
    vf acc[4][4];
    for (int r = 0; r < NO; r++)
        for (int c = 0; c < NI; c++) acc[r][c] = vbcast(0.0f);
    for (int64_t j = 0; j < mp; j += VL) {
        vf gg[4];
        for (int r = 0; r < NO; r++) gg[r] = vload(g + r * mp + j);
        for (int c = 0; c < NI; c++) {
            vf x = vload(rows[c] + j);
            for (int r = 0; r < NO; r++) acc[r][c] += gg[r] * x;
        }
    }
    for (int r = 0; r < NO; r++)
        for (int c = 0; c < NI; c++) t[r][c] = hsum(acc[r][c]);
}

#define WG_NI(NO)                                            \
    switch (ni) {                                            \
        case 1: wg_tile(g + o0 * mp, mp, rows, NO, 1, t); break; \
        case 2: wg_tile(g + o0 * mp, mp, rows, NO, 2, t); break; \
        case 3: wg_tile(g + o0 * mp, mp, rows, NO, 3, t); break; \
        default: wg_tile(g + o0 * mp, mp, rows, NO, 4, t); break; \
    }

/* dW[o][i] = sum_j g[o][j] a[i][j] for i < in, and the bias dW[o][ld - 1] = sum_j g[o][j]
 * (a row of ones), into the block [out][ld] at d (its padding left as it is). */
static void layer_weight_grad(const float *g, int out, const float *a, int in, int ld,
                              float *d, int64_t mp, const float *ones) {
    for (int o0 = 0; o0 < out; o0 += 4) {
        int no = out - o0 < 4 ? out - o0 : 4;
        for (int i0 = 0; i0 <= in; i0 += 4) {
            int ni = in + 1 - i0 < 4 ? in + 1 - i0 : 4;
            const float *rows[4];
            int cols[4];
            for (int c = 0; c < ni; c++) {
                int i = i0 + c;
                rows[c] = i < in ? a + i * mp : ones;
                cols[c] = i < in ? i : ld - 1;
            }
            float t[4][4];
            switch (no) {
                case 1: WG_NI(1) break;
                case 2: WG_NI(2) break;
                case 3: WG_NI(3) break;
                default: WG_NI(4) break;
            }
            for (int r = 0; r < no; r++)
                for (int c = 0; c < ni; c++) d[(int64_t)(o0 + r) * ld + cols[c]] = t[r][c];
        }
    }
}

/* gin[i][:] = (sum_o W[o][i] g[o][:]) where a[i][:] > 0, else 0 (the ReLU's backward). */
static void layer_input_grad(const float *W, int ld, int in, int out, const float *g,
                             const float *a, float *gin, int64_t mp) {
    const vf zero = vbcast(0.0f);
    int i = 0;
    for (; i + 4 <= in; i += 4) {  /* 4 inputs x 2 vectors of samples (as layer_forward) */
        int64_t j = 0;
        for (; j + 2 * VL <= mp; j += 2 * VL) {
            vf c0 = zero, c1 = zero, c2 = zero, c3 = zero, d0 = zero, d1 = zero, d2 = zero,
               d3 = zero;
            for (int o = 0; o < out; o++) {
                const float *w = W + (int64_t)o * ld + i;
                vf x = vload(g + o * mp + j), y = vload(g + o * mp + j + VL);
                c0 += w[0] * x;
                c1 += w[1] * x;
                c2 += w[2] * x;
                c3 += w[3] * x;
                d0 += w[0] * y;
                d1 += w[1] * y;
                d2 += w[2] * y;
                d3 += w[3] * y;
            }
            c0 = vmask(c0, vload(a + (i + 0) * mp + j));
            c1 = vmask(c1, vload(a + (i + 1) * mp + j));
            c2 = vmask(c2, vload(a + (i + 2) * mp + j));
            c3 = vmask(c3, vload(a + (i + 3) * mp + j));
            d0 = vmask(d0, vload(a + (i + 0) * mp + j + VL));
            d1 = vmask(d1, vload(a + (i + 1) * mp + j + VL));
            d2 = vmask(d2, vload(a + (i + 2) * mp + j + VL));
            d3 = vmask(d3, vload(a + (i + 3) * mp + j + VL));
            vstore(gin + (i + 0) * mp + j, c0);
            vstore(gin + (i + 1) * mp + j, c1);
            vstore(gin + (i + 2) * mp + j, c2);
            vstore(gin + (i + 3) * mp + j, c3);
            vstore(gin + (i + 0) * mp + j + VL, d0);
            vstore(gin + (i + 1) * mp + j + VL, d1);
            vstore(gin + (i + 2) * mp + j + VL, d2);
            vstore(gin + (i + 3) * mp + j + VL, d3);
        }
        for (; j < mp; j += VL) {
            vf c0 = zero, c1 = zero, c2 = zero, c3 = zero;
            for (int o = 0; o < out; o++) {
                const float *w = W + (int64_t)o * ld + i;
                vf x = vload(g + o * mp + j);
                c0 += w[0] * x;
                c1 += w[1] * x;
                c2 += w[2] * x;
                c3 += w[3] * x;
            }
            vstore(gin + (i + 0) * mp + j, vmask(c0, vload(a + (i + 0) * mp + j)));
            vstore(gin + (i + 1) * mp + j, vmask(c1, vload(a + (i + 1) * mp + j)));
            vstore(gin + (i + 2) * mp + j, vmask(c2, vload(a + (i + 2) * mp + j)));
            vstore(gin + (i + 3) * mp + j, vmask(c3, vload(a + (i + 3) * mp + j)));
        }
    }
    for (; i < in; i++) {
        for (int64_t j = 0; j < mp; j += VL) {
            vf c0 = zero;
            for (int o = 0; o < out; o++) c0 += W[(int64_t)o * ld + i] * vload(g + o * mp + j);
            c0 = vmask(c0, vload(a + i * mp + j));
            vstore(gin + i * mp + j, c0);
        }
    }
}

/* One model of hidden width `width` (the block's padding, dims[l] >= width, is skipped: its
 * products would add exact zeros): see the header.  act: depth + 1 activation buffers
 * [dims[l]][mp] (act[0] the inputs), out: [mp], g0/g1: [wmax][mp] ping-pong gradients;
 * grad: the model's [P_net] slots, its padding set to 0. */
static double one_model(int depth, const int64_t *dims, const int64_t *offs, int width,
                        const float *th, const float *x, const float *y, int64_t m, int64_t mp,
                        float scale, float inv_var, float half_log, float **act, float *out,
                        float *g0, float *g1, const float *ones, float *grad) {
    int p = (int)dims[0];
    float *a0 = act[0];
    /* the inputs, feature-major: blocks of VL samples, whose rows stay in L1 while their
     * p columns are written (3x faster here than a row at a time over all samples) */
    int64_t j0 = 0;
    for (; j0 + VL <= m; j0 += VL)
        for (int i = 0; i < p; i++) {
            float *dst = a0 + i * mp + j0;
            for (int l = 0; l < VL; l++) dst[l] = x[(j0 + l) * (p + 1) + i];
        }
    for (int i = 0; i < p; i++) {
        for (int64_t j = j0; j < m; j++) a0[i * mp + j] = x[j * (p + 1) + i];
        for (int64_t j = m; j < mp; j++) a0[i * mp + j] = 0.0f;
    }
    /* layer l: real in -> out, its block's rows dims[l] + 1 floats apart */
#define REAL(l) ((l) == 0 ? p : (l) == depth + 1 ? 1 : width)
    for (int l = 0; l < depth; l++)
        layer_forward(th + offs[l], (int)dims[l] + 1, REAL(l), REAL(l + 1), act[l], act[l + 1],
                      mp, 1);
    layer_forward(th + offs[depth], (int)dims[depth] + 1, REAL(depth), 1, act[depth], out, mp,
                  0);
    /* the Gaussian likelihood: nll_j = 0.5 log(2 pi s^2) + r^2 / (2 s^2), r = y - f;
     * d nll_j / d f = (f - y) / s^2, times the objective's scale */
    double nll = 0.0;
    float gs = scale * inv_var, h = 0.5f * inv_var;
    for (int64_t j = 0; j < m; j++) {
        float r = y[j] - out[j];
        nll += (double)(half_log + r * r * h);
        g0[j] = -r * gs;
    }
    for (int64_t j = m; j < mp; j++) g0[j] = 0.0f;
    memset(grad, 0, (size_t)offs[depth + 1] * sizeof(float));
    float *g = g0, *gn = g1;
    for (int l = depth; l >= 0; l--) {
        int in = REAL(l), ld = (int)dims[l] + 1;
        layer_weight_grad(g, REAL(l + 1), act[l], in, ld, grad + offs[l], mp, ones);
        if (l == 0) break;
        layer_input_grad(th + offs[l], ld, in, REAL(l + 1), g, act[l], gn, mp);
        float *t = g;
        g = gn;
        gn = t;
    }
#undef REAL
    return nll;
}

/* The entry point (simulate/core/native/__init__.py): E models (rows of theta with stride
 * ldt, hidden widths widths[e] <= dims[1]; x [E][m][p + 1], y [E][m]); per-model scale and
 * noise sd s; writes nll [E] and
 * grad [E][P_net].  Returns 0; 1 where scratch memory could not be had, 2 for more than 63
 * hidden layers. */
int asvi_fused_mlp_gaussian(int64_t E, int64_t m, int depth, const int64_t *dims,
                            const int64_t *offs, const int64_t *widths, int64_t P_net,
                            const float *theta, int64_t ldt,
                            const float *x, const float *y, const float *scale, const float *sd,
                            float *nll, float *grad, int nthreads) {
    /* rows of mp floats: m rounded up to VL lanes, plus VL where that is a multiple of 256
     * floats -- rows 4 KiB apart share their L1 sets (measured: the products 25% slower) */
    int64_t mp = (m + VL - 1) / VL * VL, wmax = 1;
    if (mp % 256 == 0) mp += VL;
    for (int l = 0; l <= depth + 1; l++)
        if (dims[l] > wmax) wmax = dims[l];
    if (depth + 1 > 64) return 2;
    int failed = 0;
#pragma omp parallel num_threads(nthreads)
    {
        int64_t floats = 0;
        for (int l = 0; l <= depth; l++) floats += dims[l] * mp;
        floats += 2 * mp + 2 * wmax * mp;
        float *buf = aligned_alloc(64, (size_t)floats * sizeof(float));
        if (buf == NULL) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp barrier
        int bad;
#pragma omp atomic read
        bad = failed;
        if (!bad) {  /* every thread reads the same flag after the barrier */
            float *act[64], *q = buf;
            for (int l = 0; l <= depth; l++) {
                act[l] = q;
                q += dims[l] * mp;
            }
            float *out = q, *g0 = q + mp, *g1 = q + mp + wmax * mp, *ones = g1 + wmax * mp;
            for (int64_t j = 0; j < mp; j++) ones[j] = 1.0f;
#pragma omp for schedule(static)
            for (int64_t e = 0; e < E; e++) {
                float var = sd[e] * sd[e];  /* as torch computes them: sd * sd, then log */
                float half_log = 0.5f * logf(2.0f * (float)M_PI * var);
                nll[e] = (float)one_model(depth, dims, offs, (int)widths[e], theta + e * ldt,
                                          x + e * m * (dims[0] + 1), y + e * m, m, mp, scale[e],
                                          1.0f / var, half_log, act, out, g0, g1, ones,
                                          grad + e * P_net);
            }
        }
        free(buf);
    }
    return failed;
}
