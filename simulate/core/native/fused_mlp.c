/* The batched ReLU network's forward pass, Gaussian negative log-likelihood and hand-written
 * backward pass, fused per model so that a model's activations stay in its core's cache.
 *
 * Built and loaded by simulate/core/native/library.py; the interface is documented in
 * simulate/core/native/network.py and steps.py, the arithmetic in the package's __init__.py;
 * the reference it is tested against is simulate.core.layout.mlp_nll_and_grad.
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
 * same on machines of one vector length when built by one compiler version with the build's
 * -mtune=generic (the module's docstring), within float rounding between the two VLs. */
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

/* hsum8 needs __builtin_shufflevector (clang; GCC from 12); elsewhere the tiles use hsum */
#if VL == 8 && (defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12))
#define HAVE_HSUM8 1
/* Lane r of the result is hsum(v[r]) for r < 8, bit for bit for every finite sum (where
 * NaNs meet, which one's sign and payload survive may differ, as it may in any sum): the
 * 8 x 8 transpose (c[k]'s lane r is v[r]'s lane k), then 0 + c[0] + c[1] + ... + c[7] in
 * that order, hsum's sums done 8 at a time (32 vector operations against hsum's 8 x 15). */
#define SHUF8(a, b, i0, i1, i2, i3, i4, i5, i6, i7) \
    __builtin_shufflevector(a, b, i0, i1, i2, i3, i4, i5, i6, i7)
static inline __attribute__((always_inline)) vf hsum8(const vf *v) {
    vf a[8], b[8], c[8];
    for (int i = 0; i < 8; i += 2) {
        a[i] = SHUF8(v[i], v[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
        a[i + 1] = SHUF8(v[i], v[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
    }
    for (int q = 0; q < 8; q += 4) {
        b[q] = SHUF8(a[q], a[q + 2], 0, 1, 8, 9, 4, 5, 12, 13);
        b[q + 1] = SHUF8(a[q], a[q + 2], 2, 3, 10, 11, 6, 7, 14, 15);
        b[q + 2] = SHUF8(a[q + 1], a[q + 3], 0, 1, 8, 9, 4, 5, 12, 13);
        b[q + 3] = SHUF8(a[q + 1], a[q + 3], 2, 3, 10, 11, 6, 7, 14, 15);
    }
    for (int k = 0; k < 4; k++) {
        c[k] = SHUF8(b[k], b[k + 4], 0, 1, 2, 3, 8, 9, 10, 11);
        c[k + 4] = SHUF8(b[k], b[k + 4], 4, 5, 6, 7, 12, 13, 14, 15);
    }
    vf s = vbcast(0.0f);
    for (int k = 0; k < 8; k++) s += c[k];
    return s;
}
#endif

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
#ifdef HAVE_HSUM8
    /* the tile's sums 8 at a time (hsum8), the last group padded with zeros */
    vf v[16], h[2];
    for (int q = 0; q < NO * NI; q++) v[q] = acc[q / NI][q % NI];
    for (int q = NO * NI; q < 16; q++) v[q] = vbcast(0.0f);
    h[0] = hsum8(v);
    if (NO * NI > 8) h[1] = hsum8(v + 8);
    for (int q = 0; q < NO * NI; q++) t[q / NI][q % NI] = h[q / 8][q % 8];
#else
    for (int r = 0; r < NO; r++)
        for (int c = 0; c < NI; c++) t[r][c] = hsum(acc[r][c]);
#endif
}

#define WG_NI(NO)                                            \
    switch (ni) {                                            \
        case 1: wg_tile(g + o0 * mp, mp, rows, NO, 1, t); break; \
        case 2: wg_tile(g + o0 * mp, mp, rows, NO, 2, t); break; \
        case 3: wg_tile(g + o0 * mp, mp, rows, NO, 3, t); break; \
        default: wg_tile(g + o0 * mp, mp, rows, NO, 4, t); break; \
    }

/* The weight gradient's tiles: 4 outputs x WG_NI_MAX inputs, their accumulators in
 * registers -- 4 x 4 where there are 32 vector registers (AVX-512), 4 x 3 where there are
 * 16 (AVX2: 16 accumulators and the operands spilled one of them, whose loop-carried chain
 * then went through memory: the full tier's p = 200 program's step 5.9 -> 5.2 ms with
 * 4 x 3).  Each dW[o][i] is the same sum in the same order whatever the tile.  One caveat
 * on "the same numbers": GCC tuned for some CPUs (znver3) does not fuse the multiply-add of
 * a lone accumulator, so a 1 x 1 tile is computed unfused, every other tile fused; a 1 x 1
 * tile is always the last column, the bias, whose factor is 1 (exact either way), so the
 * tile's shape changes no number -- a tiling that put a weight column alone would. */
#ifndef WG_NI_MAX
#if VL == 16
#define WG_NI_MAX 4
#else
#define WG_NI_MAX 3
#endif
#endif
#if WG_NI_MAX < 1 || WG_NI_MAX > 4
#error "WG_NI_MAX must be 1..4 (the tile's arrays hold 4 x 4)"
#endif

/* dW[o][i] = sum_j g[o][j] a[i][j] for i < in, and the bias dW[o][ld - 1] = sum_j g[o][j]
 * (a row of ones), into the block [out][ld] at d (its padding left as it is). */
static void layer_weight_grad(const float *g, int out, const float *a, int in, int ld,
                              float *d, int64_t mp, const float *ones) {
    for (int o0 = 0; o0 < out; o0 += 4) {
        int no = out - o0 < 4 ? out - o0 : 4;
        for (int i0 = 0; i0 <= in; i0 += WG_NI_MAX) {
            int ni = in + 1 - i0 < WG_NI_MAX ? in + 1 - i0 : WG_NI_MAX;
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
                        const float *th, const float *x, const int64_t *rows, const float *y,
                        int64_t m, int64_t mp,
                        float scale, float inv_var, float half_log, float **act, float *out,
                        float *g0, float *g1, const float *ones, float *grad) {
    int p = (int)dims[0];
    float *a0 = act[0];
    /* the inputs, feature-major: blocks of VL samples, whose rows stay in L1 while their
     * p columns are written (3x faster here than a row at a time over all samples).  Sample
     * j is row rows[j] of x (rows of p + 1 floats), or row j where rows is NULL: the
     * minibatch drawn in C is read from the data in place, not copied first. */
#define XROW(j) (x + (rows != NULL ? rows[j] : (int64_t)(j)) * (p + 1))
    int64_t j0 = 0;
    for (; j0 + VL <= m; j0 += VL) {
        const float *xr[VL];
        for (int l = 0; l < VL; l++) xr[l] = XROW(j0 + l);
        for (int i = 0; i < p; i++) {
            float *dst = a0 + i * mp + j0;
            for (int l = 0; l < VL; l++) dst[l] = xr[l][i];
        }
    }
    for (int i = 0; i < p; i++) {
        for (int64_t j = j0; j < m; j++) a0[i * mp + j] = XROW(j)[i];
        for (int64_t j = m; j < mp; j++) a0[i * mp + j] = 0.0f;
    }
#undef XROW
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

/* The entry point (simulate/core/native/network.py): E models (rows of theta with stride
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
                                          x + e * m * (dims[0] + 1), NULL, y + e * m, m, mp,
                                          scale[e],
                                          1.0f / var, half_log, act, out, g0, g1, ones,
                                          grad + e * P_net);
            }
        }
        free(buf);
    }
    return failed;
}

/* ---------------------------------------------------------------------------------------
 * The whole training step per model (mlp="native-step"): the draws from the counter-based
 * streams (simulate.core.rng), the Gaussian slab and the Gumbel-sigmoid inclusion
 * transforms, the network pass above for each of the K draws, L1 / L2 / L3, the
 * hand-written gradients of simulate.core.step.spike_slab_step and the optimiser's update
 * (simulate.core.optim), in one pass over each model's parameters.  Documented in
 * simulate/core/native/steps.py (fused_steps); tested against the batched step. */

/* The step's elementwise functions on VL lanes at once (branch-free: both sides of every
 * case computed, then selected), written here because the C library's are scalar.  Each is
 * within an ulp or two of the C library's (Cephes' expf / logf polynomials), so the step
 * equals the batched one to float rounding, not bit for bit. */
typedef uint32_t vu __attribute__((vector_size(VL * sizeof(float))));

static inline vf vsel(vi m, vf a, vf b) { return (vf)(((vi)a & m) | ((vi)b & ~m)); }
static inline vf vfloor(vf x) {
    vf t = __builtin_convertvector(__builtin_convertvector(x, vi), vf);
    return t + __builtin_convertvector((vi)(t > x), vf); /* true is -1 */
}
static inline vf vsqrt(vf x) {
    vf r = x;
    for (int k = 0; k < VL; k++) r[k] = __builtin_sqrtf(x[k]);
    return r;
}

/* exp: x = n log 2 + r, |r| <= log(2) / 2, a degree-6 polynomial, times 2^n in two factors
 * (so that results down to the denormals are had); +inf past 88.72, 0 below -103.97, NaN
 * kept */
static inline vf vexp(vf x) {
    vf xc = vsel(x > vbcast(88.7228f), vbcast(88.7228f), x);
    xc = vsel(xc < vbcast(-103.972f), vbcast(-103.972f), xc);
    vf n = vfloor(xc * 1.44269504088896341f + 0.5f);
    vf r = xc - n * 0.693359375f + n * 2.12194440e-4f;
    vf p = 1.9875691500e-4f * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    vi ni = __builtin_convertvector(n, vi), n1 = ni >> 1, n2 = ni - n1;
    vf y = p * (vf)((n1 + 127) << 23) * (vf)((n2 + 127) << 23);
    y = vsel(x > vbcast(88.7228f), vbcast(INFINITY), y);
    y = vsel(x < vbcast(-103.972f), vbcast(0.0f), y);
    return vsel(x != x, x, y);
}

/* log: x = m 2^e with m in [sqrt(1/2), sqrt(2)), a degree-9 polynomial in m - 1; denormals
 * scaled first; 0 -> -inf, negative -> NaN, +inf and NaN kept */
static inline vf vlog(vf x) {
    vi tiny = x < vbcast(1.17549435e-38f);
    vf xs = vsel(tiny, x * 8388608.0f, x);
    vi bits = (vi)xs;
    vf e = __builtin_convertvector(((bits >> 23) & 0xff) - 126, vf);
    e = vsel(tiny, e - 23.0f, e);
    vf m = (vf)((bits & 0x007fffff) | 0x3f000000); /* [0.5, 1) */
    vi lo = m < vbcast(0.707106781186547524f);
    e = vsel(lo, e - 1.0f, e);
    m = vsel(lo, m + m - 1.0f, m - 1.0f);
    vf z = m * m;
    vf y = 7.0376836292e-2f * m - 1.1514610310e-1f;
    y = y * m + 1.1676998740e-1f;
    y = y * m - 1.2420140846e-1f;
    y = y * m + 1.4249322787e-1f;
    y = y * m - 1.6668057665e-1f;
    y = y * m + 2.0000714765e-1f;
    y = y * m - 2.4999993993e-1f;
    y = y * m + 3.3333331174e-1f;
    y = y * m * z;
    y = y - e * 2.12194440e-4f;
    y = y - 0.5f * z;
    vf out = m + y + e * 0.693359375f;
    out = vsel(x == vbcast(0.0f), vbcast(-INFINITY), out);
    out = vsel(x < vbcast(0.0f), vbcast(NAN), out);
    out = vsel(x == vbcast(INFINITY), x, out);
    return vsel(x != x, x, out);
}

static inline vf vsigmoid(vf x) { return 1.0f / (1.0f + vexp(-x)); }

/* torch's softplus (beta 1, threshold 20): x past 20, else log1p(exp(x)), log1p(t) as
 * log(1 + t) t / ((1 + t) - 1) (exact where 1 + t rounds to 1) */
static inline vf vsoftplus(vf x) {
    vf t = vexp(x), u = 1.0f + t, d = u - 1.0f;
    vf l = vsel(d == vbcast(0.0f), t, vlog(u) * (t / vsel(d == vbcast(0.0f), vbcast(1.0f), d)));
    return vsel(x > vbcast(20.0f), x, l);
}

/* rng.mix32's rounds, on one 32-bit word or on 32-bit lanes */
#define MIX32_ROUNDS(x)                                                                        \
    do {                                                                                       \
        x ^= x >> 16;                                                                          \
        x *= 0x7FEB352Du;                                                                      \
        x ^= x >> 15;                                                                          \
        x *= 0x5BD1E995u;                                                                      \
        x ^= x >> 16;                                                                          \
        x *= 0x2C1B3C6Du;                                                                      \
        x ^= x >> 15;                                                                          \
    } while (0)
static inline uint32_t mix32u(uint32_t x) {
    MIX32_ROUNDS(x);
    return x;
}
static inline vu vmix32(vu x) {
    MIX32_ROUNDS(x);
    return x;
}

/* rng.bits_uniform: the top 23 of the 32 bits, (h + 1/2) / 2^23, strictly inside (0, 1) */
static inline vf vbits_uniform(vu bits) {
    return (__builtin_convertvector((vi)((bits >> 9) & 0x7FFFFFu), vf) + 0.5f) / 8388608.0f;
}

/* sqrt(2) erfinv(2u - 1), the standard normal at u: Giles' single-precision erfinv
 * (polynomials in w = -log(4 u (1 - u)) and sqrt(w) - 3; measured over every 23-bit
 * uniform: within 4.2 float ulps of the exact value, ATen's float erfinv within 1.5) */
static inline vf vnormal(vf u) {
    vf x = 2.0f * u - 1.0f;
    vf w = -vlog((1.0f - x) * (1.0f + x));
    vf a = w - 2.5f;
    vf p = 2.81022636e-08f * a + 3.43273939e-07f;
    p = p * a - 3.5233877e-06f;
    p = p * a - 4.39150654e-06f;
    p = p * a + 0.00021858087f;
    p = p * a - 0.00125372503f;
    p = p * a - 0.00417768164f;
    p = p * a + 0.246640727f;
    p = p * a + 1.50140941f;
    /* the tail's polynomial only where a lane needs it (w >= 5: |2u - 1| > 0.9966, about 3
     * vectors in 100 at VL = 8, 5 at 16; or NaN, which cannot occur with u inside (0, 1));
     * elsewhere the select below would return p in every lane */
    vi central = w < vbcast(5.0f);
    int all_central = 1;
    for (int k = 0; k < VL; k++) all_central &= central[k] != 0;
    if (all_central) return p * x * 1.41421356237309505f;
    vf b = vsqrt(w) - 3.0f;
    vf q = -0.000200214257f * b + 0.000100950558f;
    q = q * b + 0.00134934322f;
    q = q * b - 0.00367342844f;
    q = q * b + 0.00573950773f;
    q = q * b - 0.0076224613f;
    q = q * b + 0.00943887047f;
    q = q * b + 1.00167406f;
    q = q * b + 2.83297682f;
    return vsel(central, p, q) * x * 1.41421356237309505f;
}

/* The next `each` of a minibatch's cache-line requests (line `*at` of all of them: line
 * at % lines of row rows[at / lines] of X, rows of cols floats); *left counts those left. */
static inline void prefetch_share(const float *X, const int64_t *rows, int64_t cols,
                                  int64_t lines, int64_t each, int64_t *left, int64_t *at) {
    for (int64_t q = 0; q < each && *left > 0; q++, (*left)--, (*at)++)
        __builtin_prefetch(X + rows[*at / lines] * cols + *at % lines * 16);
}

/* rng.offset_words: the two words draw number o contributes to every slot's hash */
static inline void offset_words(int64_t o, uint32_t *a, uint32_t *b) {
    uint64_t u = (uint64_t)o;
    *a = mix32u((uint32_t)(u & 0xFFFFFFFFu) ^ 0x632BE5ABu);
    *b = mix32u((uint32_t)(u >> 32) ^ *a);
}

/* S consecutive steps of E models, steps t0 .. t0 + S - 1.  params, m1, m2: [3][E][P]
 * (location, raw slab scale, inclusion logit), updated in place; mask [E][P]; H [E];
 * eps_base, gum_base [E][P] int32 (gum_base NULL: no indicators, the Dense-BNN family);
 * draw k of step t hashes at draw number t K + k (rng.offset_words, made here);
 * x [S][E][m][p + 1], y [S][E][m]; sd [E] the noise sd; held [E] the models held from the
 * start (a model whose objective is not finite at a step is held from the next one on, as
 * the trainer holds a failed model); step [S][3][E] each step's, row's and model's step
 * size (lr_scale applied); kl_weight [S] the KL warm-up's weight; corr2 [S] Adam's second
 * bias correction; L1, L2, L3 [S][E] and nonfinite [S][E] written.  The minibatch: x and
 * y as given, or, where iid_base [E][m] (int32) is not NULL, drawn here as the sampler
 * draws it (sampling="iid": index min(floor(u n), n - 1) from the float64 uniform of the
 * hashed bits at draw number t) and gathered from X_aug [D n][p + 1], y_flat [D n] at rows
 * data_index[e] n + index (x and y then unused).  opt: 0 Adam, 1 RMSprop (b2 its alpha;
 * m1 untouched).  skip_held: a model held from the start is not computed at all but for
 * its moments' decay (the same numbers as computing it: its gradient is zeroed anyway);
 * its terms are NaN and it is not non-finite.
 *
 * Each model's real slots (mask not 0) are gathered into contiguous lanes (its parameters
 * and moments), stepped S times there, VL slots at a time, and scattered back; its
 * padding (mask 0) is skipped: in the batched step its theta and gradient are 0 and its
 * moments stay 0, so it never moves.  Every operation on a slot is the one-step
 * kernel's, in the same order, so S steps in one call give the numbers of S calls of one
 * step bit for bit.  Returns 0; 1 where scratch memory could not be had, 2 for more than
 * 63 hidden layers. */
int asvi_fused_steps_spike_slab(
    int64_t E, int64_t P, int64_t K, int64_t m, int depth, const int64_t *dims,
    const int64_t *offs, const int64_t *widths, float *params, float *m1, float *m2,
    const float *mask, const float *H, const int32_t *eps_base, const int32_t *gum_base,
    int64_t S, int64_t t0, const float *x, const float *y, const float *sd, const uint8_t *held,
    double n, double tau, double lambda_s, double sigma_0, const float *kl_weight,
    const float *step, const float *corr2, double b1, double b2, double adam_eps, int opt,
    const int32_t *iid_base, const float *X_aug, const float *y_flat, const int64_t *data_index,
    int64_t nrows, int skip_held, float *L1, float *L2, float *L3, uint8_t *nonfinite,
    int nthreads) {
    int64_t mp = (m + VL - 1) / VL * VL, wmax = 1, Pv = (P + VL - 1) / VL * VL;
    const int64_t cols = dims[0] + 1;
    if (mp % 256 == 0) mp += VL;
    for (int l = 0; l <= depth + 1; l++)
        if (dims[l] > wmax) wmax = dims[l];
    if (depth + 1 > 64) return 2;
    const int ind = gum_base != NULL;
    const float s0 = (float)sigma_0, s0sq = (float)(sigma_0 * sigma_0), log_s0 = logf(s0);
    const float ftau = (float)tau;
    const float fb1 = (float)b1, fb2 = (float)b2, fe = (float)adam_eps;
    /* 1 - b as the batched optimiser passes it: computed in double, then rounded */
    const float cb1 = (float)(1.0 - b1), cb2 = (float)(1.0 - b2);
    const float LOG2f = 0.6931471805599453f;
    int failed = 0;
#pragma omp parallel num_threads(nthreads)
    {
        int64_t floats = 0;
        for (int l = 0; l <= depth; l++) floats += dims[l] * mp;
        floats += 2 * mp + 2 * wmax * mp;
        /* full rows: per draw theta and its gradient; gathered lanes (Pv each): the slot
         * numbers, loc, raw, logit, the two moments of each row, mask, the two bases, nu,
         * softplus(raw), its derivative, the KL, the three gradient rows, per draw eps, w,
         * G and the gathered gradient */
        floats += 2 * K * P + 21 * Pv + 4 * K * Pv;
        floats += m; /* the drawn minibatch's responses (its inputs are read in place) */
        /* aligned_alloc wants a size that is a multiple of the alignment (C11) */
        size_t bytes = (size_t)(floats + 64 + 15) / 16 * 16 * sizeof(float);
        float *buf = aligned_alloc(64, bytes);
        int64_t *ROWS = malloc((size_t)(m > 0 ? m : 1) * sizeof(int64_t)); /* its rows of X_aug */
        if (buf == NULL || ROWS == NULL) {
#pragma omp atomic write
            failed = 1;
        } else {
            memset(buf, 0, bytes);
        }
#pragma omp barrier
        int bad;
#pragma omp atomic read
        bad = failed;
        if (!bad) {
            float *act[64], *q = buf;
            for (int l = 0; l <= depth; l++) {
                act[l] = q;
                q += dims[l] * mp;
            }
            float *out = q, *g0 = q + mp, *g1 = q + mp + wmax * mp, *ones = g1 + wmax * mp;
            q = ones + mp;
            float *TH = q, *DT = q + K * P;
            q += 2 * K * P;
            int32_t *IDX = (int32_t *)q, *EB = (int32_t *)(q + Pv), *GB = (int32_t *)(q + 2 * Pv);
            float *LOC = q + 3 * Pv, *RAW = q + 4 * Pv, *LGT = q + 5 * Pv, *MK = q + 6 * Pv,
                  *NU = q + 7 * Pv, *SC = q + 8 * Pv, *DSC = q + 9 * Pv, *KL = q + 10 * Pv,
                  *GL = q + 11 * Pv, *GR = q + 12 * Pv, *GG = q + 13 * Pv;
            float *MA[3] = {q + 15 * Pv, q + 16 * Pv, q + 17 * Pv};
            float *VA[3] = {q + 18 * Pv, q + 19 * Pv, q + 20 * Pv};
            q += 21 * Pv;
            float *EPS = q, *W = q + K * Pv, *G = q + 2 * K * Pv, *GD = q + 3 * K * Pv;
            q += 4 * K * Pv;
            float *YB = q;
            for (int64_t j = 0; j < mp; j++) ones[j] = 1.0f;
#pragma omp for schedule(static)
            for (int64_t e = 0; e < E; e++) {
                float *rowp[3], *rowm1[3], *rowm2[3];
                for (int r = 0; r < 3; r++) {
                    rowp[r] = params + (r * E + e) * P;
                    rowm1[r] = m1 + (r * E + e) * P;
                    rowm2[r] = m2 + (r * E + e) * P;
                }
                const float *mk = mask + e * P;
                /* gather the real slots; the lanes past them hold zeros (harmless, unused) */
                int64_t R = 0;
                for (int64_t i = 0; i < P; i++)
                    if (mk[i] != 0.0f) IDX[R++] = (int32_t)i;
                int64_t Rv = (R + VL - 1) / VL * VL;
                float *prow[3] = {LOC, RAW, LGT};
                for (int64_t j = 0; j < Rv; j++) {
                    int live = j < R;
                    int64_t i = live ? IDX[j] : 0;
                    for (int r = 0; r < 3; r++) {
                        prow[r][j] = live ? rowp[r][i] : 0.0f;
                        MA[r][j] = live ? rowm1[r][i] : 0.0f;
                        VA[r][j] = live ? rowm2[r][i] : 0.0f;
                    }
                    MK[j] = live ? mk[i] : 0.0f;
                    EB[j] = live ? eps_base[e * P + i] : 0;
                    GB[j] = live && ind ? gum_base[e * P + i] : 0;
                }
                /* every slot the scatter below does not write (mask 0) is 0, as in the
                 * batched step, not what a previous model of this thread left */
                memset(TH, 0, (size_t)(K * P) * sizeof(float));
                int dead = held[e] != 0; /* held: from the start, or failed at a step */
                /* held from the start, with skip_held: only its moments' decay is computed */
                const int skip_model = skip_held && dead;
                for (int64_t s = 0; s < S; s++) {
                    const int64_t t = t0 + s, se = s * E + e;
                    int nf = 0;
                    if (skip_model) { /* held throughout and not computed: terms NaN */
                        L1[se] = L2[se] = L3[se] = NAN;
                        nonfinite[se] = 0;
                    } else {
                        /* the minibatch, first: its rows are scattered over the data (read
                         * from memory, not cache), so they are requested here and read
                         * after the slab's and the draws' passes, during which a share of
                         * the requests is issued each VL slots (prefetches: no number
                         * depends on them) */
                        const float *xe = X_aug, *ye = YB;
                        const int64_t *xrows = ROWS;
                        /* 64-byte lines from a row's start: one more than its length
                         * needs, as rows need not start at a line */
                        const int64_t lines = (cols + 15) / 16 + 1;
                        int64_t pf_left = 0, pf_at = 0, pf_each = 0;
                        if (iid_base == NULL) {
                            xe = x + se * m * cols;
                            ye = y + se * m;
                            xrows = NULL;
                        } else {
                            uint32_t ia, ib;
                            offset_words(t, &ia, &ib);
                            for (int64_t j = 0; j < m; j++) {
                                uint32_t bits = mix32u(mix32u((uint32_t)iid_base[e * m + j] ^ ia) ^ ib);
                                double u = ((double)((bits >> 9) & 0x7FFFFFu) + 0.5) / 8388608.0;
                                int64_t idx = (int64_t)(u * (double)nrows);
                                if (idx > nrows - 1) idx = nrows - 1;
                                int64_t row = data_index[e] * nrows + idx;
                                ROWS[j] = row;
                                YB[j] = y_flat[row];
                            }
                            pf_left = m * lines;
                            int64_t its = (1 + K) * (Rv / VL); /* the slab's and the draws' */
                            pf_each = (pf_left + its - 1) / (its > 0 ? its : 1);
                        }
                        /* the slab, the inclusion probabilities, the KL; L2, S summed in lanes */
                        vf l2v = vbcast(0.0f), Sv = vbcast(0.0f);
                        for (int64_t j = 0; j < Rv; j += VL) {
                            vf loc = vload(LOC + j), raw = vload(RAW + j), mkv = vload(MK + j);
                            vf nu = ind ? vsigmoid(vload(LGT + j)) : vbcast(1.0f);
                            vf sc = vsoftplus(raw), dsc = vsigmoid(raw);
                            vf kl = log_s0 - vlog(sc) + (sc * sc + loc * loc) / (2.0f * s0sq) - 0.5f;
                            vstore(NU + j, nu);
                            vstore(SC + j, sc);
                            vstore(DSC + j, dsc);
                            vstore(KL + j, kl);
                            l2v += nu * kl * mkv;
                            Sv += nu * mkv;
                            prefetch_share(X_aug, ROWS, cols, lines, pf_each, &pf_left, &pf_at);
                        }
                        /* the K draws: theta = hard(G) w mask, w = loc + softplus(raw) eps */
                        for (int64_t k = 0; k < K; k++) {
                            uint32_t wa, wb;
                            offset_words(t * K + k, &wa, &wb);
                            float *eps = EPS + k * Pv, *w = W + k * Pv, *g = G + k * Pv;
                            float *th = TH + k * P;
                            for (int64_t j = 0; j < Rv; j += VL) {
                                vu be, bg;
                                memcpy(&be, EB + j, sizeof be);
                                vf ev = vnormal(vbits_uniform(vmix32(vmix32(be ^ wa) ^ wb)));
                                vf wv = vload(LOC + j) + vload(SC + j) * ev;
                                vf hard = vbcast(1.0f);
                                if (ind) {
                                    memcpy(&bg, GB + j, sizeof bg);
                                    vf ug = vbits_uniform(vmix32(vmix32(bg ^ wa) ^ wb));
                                    vf lg = vload(LGT + j) + vlog(ug) - vlog(1.0f - ug);
                                    vf gv = vsigmoid(lg / ftau);
                                    vstore(g + j, gv);
                                    hard = vsel(gv > vbcast(0.5f), vbcast(1.0f), vbcast(0.0f));
                                }
                                prefetch_share(X_aug, ROWS, cols, lines, pf_each, &pf_left, &pf_at);
                                vstore(eps + j, ev);
                                vstore(w + j, wv);
                                vf tv = hard * wv * vload(MK + j);
                                int64_t lanes = R - j < VL ? R - j : VL;
                                if (lanes == VL && IDX[j + VL - 1] - IDX[j] == VL - 1)
                                    vstore(th + IDX[j], tv); /* VL slots in a row */
                                else
                                    for (int64_t l = 0; l < lanes; l++) th[IDX[j + l]] = tv[l];
                            }
                        }
                        /* the network pass of each draw: L1 = mean over draws of the nll * n / m */
                        float sde = sd[e], var = sde * sde;
                        float half_log = 0.5f * logf(2.0f * (float)M_PI * var);
                        float scale = (float)(n / ((double)m * (double)K));
                        float nll = 0.0f;
                        for (int64_t k = 0; k < K; k++) {
                            nll += (float)one_model(depth, dims, offs, (int)widths[e], TH + k * P,
                                                    xe, xrows, ye, m, mp, scale, 1.0f / var,
                                                    half_log, act, out, g0, g1, ones, DT + k * P);
                            float *gd = GD + k * Pv;
                            const float *dt = DT + k * P;
                            for (int64_t j = 0; j < Rv; j += VL) {
                                if (j + VL <= R && IDX[j + VL - 1] - IDX[j] == VL - 1)
                                    vstore(gd + j, vload(dt + IDX[j])); /* VL slots in a row */
                                else
                                    for (int64_t l = j; l < j + VL; l++)
                                        gd[l] = l < R ? dt[IDX[l]] : 0.0f;
                            }
                        }
                        float l1 = nll / (float)K * (float)(n / (double)m);
                        /* L3 (eq. (loss3) as printed) and its derivative in S */
                        float l2 = hsum(l2v), Sum = hsum(Sv);
                        float l3 = 0.0f, dL3 = 0.0f, He = H[e];
                        if (ind) {
                            l3 = -0.5f * logf(2.0f * (float)M_PI * (float)M_E * Sum * (He - Sum) / He)
                                     / LOG2f
                                 + (float)lambda_s * Sum;
                            dL3 = -0.5f / LOG2f * (1.0f / Sum - 1.0f / (He - Sum)) + (float)lambda_s;
                        }
                        L1[se] = l1;
                        L2[se] = l2;
                        L3[se] = l3;
                        nf = !isfinite(l1 + l2 + l3);
                        nonfinite[se] = (uint8_t)nf;
                        /* the gradients */
                        const float klw = kl_weight[s];
                        for (int64_t j = 0; j < Rv; j += VL) {
                            vf nu = vload(NU + j), sc = vload(SC + j), dsc = vload(DSC + j);
                            vf mkv = vload(MK + j), loc = vload(LOC + j);
                            vf g_loc_kl = nu * loc / s0sq * mkv * klw;
                            vf g_raw_kl = nu * (sc / s0sq - 1.0f / sc) * dsc * mkv * klw;
                            vf a_loc = vbcast(0.0f), a_raw = vbcast(0.0f), a_log = vbcast(0.0f);
                            for (int64_t k = 0; k < K; k++) {
                                vf gw = vload(GD + k * Pv + j) * mkv;
                                vf gwh = gw;
                                if (ind) {
                                    vf Gk = vload(G + k * Pv + j);
                                    gwh = gw * vsel(Gk > vbcast(0.5f), vbcast(1.0f), vbcast(0.0f));
                                    a_log += gw * vload(W + k * Pv + j) * Gk * (1.0f - Gk);
                                }
                                a_loc += gwh;
                                a_raw += gwh * (vload(EPS + k * Pv + j) * dsc);
                            }
                            vstore(GL + j, a_loc + g_loc_kl);
                            vstore(GR + j, a_raw + g_raw_kl);
                            if (ind) {
                                vf dnu = nu * (1.0f - nu) * mkv;
                                vstore(GG + j, a_log / ftau + (vload(KL + j) + dL3) * dnu * klw);
                            } else {
                                vstore(GG + j, vbcast(0.0f));
                            }
                        }
                    }
                    const int alive = !(dead || nf);
                    dead = dead || nf;
                    /* the optimiser on the lanes: the moments decay for every model, the
                     * parameters move where the model is alive */
                    const float fc2 = corr2[s];
                    float *grow[3] = {GL, GR, GG};
                    for (int r = 0; r < 3; r++) {
                        float st = step[(s * 3 + r) * E + e];
                        float *ma = MA[r], *va = VA[r], *gd = grow[r], *pv = prow[r];
                        /* VL slots at a time, then the rest one at a time: the same
                         * operations on each slot (vsqrt and the division are correctly
                         * rounded, as sqrtf and /), so the numbers do not depend on the
                         * split; the lanes past R are not written (they must stay finite) */
                        int64_t j = 0;
                        for (; j + VL <= R; j += VL) {
                            vf g = alive ? vload(gd + j) : vbcast(0.0f), upd;
                            if (opt == 0) {
                                vf a1 = fb1 * vload(ma + j) + cb1 * g;
                                vf a2 = fb2 * vload(va + j) + cb2 * g * g;
                                vstore(ma + j, a1);
                                vstore(va + j, a2);
                                upd = st * a1 / (vsqrt(a2 * fc2) + fe);
                            } else {
                                vf a2 = fb2 * vload(va + j) + cb2 * g * g;
                                vstore(va + j, a2);
                                upd = st * g / (vsqrt(a2) + fe);
                            }
                            if (alive) vstore(pv + j, vload(pv + j) - upd);
                        }
                        for (; j < R; j++) {
                            float g = alive ? gd[j] : 0.0f, upd;
                            if (opt == 0) {
                                float a1 = fb1 * ma[j] + cb1 * g, a2 = fb2 * va[j] + cb2 * g * g;
                                ma[j] = a1;
                                va[j] = a2;
                                upd = st * a1 / (sqrtf(a2 * fc2) + fe);
                            } else {
                                float a2 = fb2 * va[j] + cb2 * g * g;
                                va[j] = a2;
                                upd = st * g / (sqrtf(a2) + fe);
                            }
                            if (alive) pv[j] = pv[j] - upd;
                        }
                    }
                }
                /* scattered back */
                for (int r = 0; r < 3; r++)
                    for (int64_t j = 0; j < R; j++) {
                        int64_t i = IDX[j];
                        rowp[r][i] = prow[r][j];
                        if (opt == 0) rowm1[r][i] = MA[r][j];
                        rowm2[r][i] = VA[r][j];
                    }
            }
        }
        free(buf);
        free(ROWS);
    }
    return failed;
}
