#include "fft.h"

#include <math.h>
#include <stdlib.h>

struct ac_rfft {
    int n, half;
    float *tw_re, *tw_im;   /* e^(-2 pi i k / half), k < half / 2: the complex stages */
    float *rot_re, *rot_im; /* e^(-2 pi i k / n), k <= half / 2: the real untangling */
    int *bitrev;            /* bit-reversed index of each of the `half` points */
    float *buf;             /* 2 * half floats: the interleaved complex work */
};

void ac_rfft_free(ac_rfft *f)
{
    if (f == NULL)
        return;
    free(f->tw_re);
    free(f->tw_im);
    free(f->rot_re);
    free(f->rot_im);
    free(f->bitrev);
    free(f->buf);
    free(f);
}

ac_rfft *ac_rfft_new(int n)
{
    if (n < 4 || n > 65536 || (n & (n - 1)) != 0)
        return NULL;
    ac_rfft *f = calloc(1, sizeof *f);
    if (f == NULL)
        return NULL;
    f->n = n;
    f->half = n / 2;
    const int half = f->half;
    f->tw_re = malloc(sizeof(float) * (size_t)(half / 2 + 1));
    f->tw_im = malloc(sizeof(float) * (size_t)(half / 2 + 1));
    f->rot_re = malloc(sizeof(float) * (size_t)(half / 2 + 1));
    f->rot_im = malloc(sizeof(float) * (size_t)(half / 2 + 1));
    f->bitrev = malloc(sizeof(int) * (size_t)half);
    f->buf = malloc(sizeof(float) * (size_t)(2 * half));
    if (!f->tw_re || !f->tw_im || !f->rot_re || !f->rot_im || !f->bitrev || !f->buf) {
        ac_rfft_free(f);
        return NULL;
    }
    /* Twiddles in double, rounded once: the transform's error is then its
     * own arithmetic's alone. */
    const double pi = 3.14159265358979323846;
    for (int k = 0; k <= half / 2; k++) {
        f->tw_re[k] = (float)cos(-2.0 * pi * k / half);
        f->tw_im[k] = (float)sin(-2.0 * pi * k / half);
        f->rot_re[k] = (float)cos(-2.0 * pi * k / n);
        f->rot_im[k] = (float)sin(-2.0 * pi * k / n);
    }
    int bits = 0;
    while ((1 << bits) < half)
        bits++;
    for (int i = 0; i < half; i++) {
        int r = 0;
        for (int b = 0; b < bits; b++)
            r |= ((i >> b) & 1) << (bits - 1 - b);
        f->bitrev[i] = r;
    }
    return f;
}

/* In-place complex transform of f->half points in f->buf, already in
 * bit-reversed order; forward, or inverse (unscaled) when `inverse`.  Radix 2,
 * decimation in time, with the trivial twiddle of each group done apart. */
static void complex_fft(ac_rfft *f, int inverse)
{
    float *z = f->buf;
    const int half = f->half;
    for (int len = 2; len <= half; len <<= 1) {
        const int h = len / 2, step = half / len;
        for (int start = 0; start < half; start += len) {
            float *a = z + 2 * start, *b = z + 2 * (start + h);
            for (int k = 0; k < h; k++) {
                /* e^(-2 pi i k / len) = tw[k * step] (k * step < half / 2),
                 * conjugated for the inverse */
                float wr = f->tw_re[k * step];
                float wi = inverse ? -f->tw_im[k * step] : f->tw_im[k * step];
                float br = b[2 * k] * wr - b[2 * k + 1] * wi;
                float bi = b[2 * k] * wi + b[2 * k + 1] * wr;
                b[2 * k] = a[2 * k] - br;
                b[2 * k + 1] = a[2 * k + 1] - bi;
                a[2 * k] += br;
                a[2 * k + 1] += bi;
            }
        }
    }
}

void ac_rfft_forward(ac_rfft *f, const float *x, float *re, float *im)
{
    const int half = f->half;
    float *z = f->buf;
    for (int i = 0; i < half; i++) {
        int r = f->bitrev[i];
        z[2 * r] = x[2 * i];
        z[2 * r + 1] = x[2 * i + 1];
    }
    complex_fft(f, 0);
    /* Z = E + iO (E, O: transforms of the even and odd samples);
     * X[k] = E[k] + e^(-2 pi i k / n) O[k], with E and O untangled from Z[k]
     * and conj(Z[half - k]).  Bins k and half - k come out of one pair. */
    re[0] = z[0] + z[1];
    im[0] = 0.0f;
    re[half] = z[0] - z[1];
    im[half] = 0.0f;
    for (int k = 1; k <= half / 2; k++) {
        const int j = half - k;
        float zr = z[2 * k], zi = z[2 * k + 1], cr = z[2 * j], ci = -z[2 * j + 1];
        float er = 0.5f * (zr + cr), ei = 0.5f * (zi + ci);
        /* O = (Z - conj(Z[j])) / 2i */
        float or_ = 0.5f * (zi - ci), oi = -0.5f * (zr - cr);
        float wr = f->rot_re[k], wi = f->rot_im[k];
        float tr = wr * or_ - wi * oi, ti = wr * oi + wi * or_;
        re[k] = er + tr;
        im[k] = ei + ti;
        /* X[j] = conj(E[k]) + w^j conj(O[k]) with w^j = -conj(w^k). */
        re[j] = er - tr;
        im[j] = -ei + ti;
    }
}

void ac_rfft_inverse(ac_rfft *f, const float *re, const float *im, float *x)
{
    const int half = f->half;
    float *z = f->buf;
    /* E[k] = (X[k] + conj(X[half-k])) / 2, O[k] = (X[k] - conj(X[half-k])) / 2 * e^(2 pi i k / n);
     * Z = E + iO, then x[2m] + i x[2m+1] = IFFT(Z)[m].  The 1/2 and the
     * 1/half of the inverse make the 1/n. */
    for (int k = 0; k <= half / 2; k++) {
        const int j = half - k;
        float ar = re[k], ai = k == 0 ? 0.0f : im[k];
        float br = re[j], bi = (j == half) ? 0.0f : -im[j]; /* conj(X[j]) */
        float er = ar + br, ei = ai + bi;
        float dr = ar - br, di = ai - bi;
        float wr = f->rot_re[k], wi = -f->rot_im[k]; /* e^(+2 pi i k / n) */
        float or_ = dr * wr - di * wi, oi = dr * wi + di * wr;
        /* Z[k] = E + iO */
        int rk = f->bitrev[k];
        z[2 * rk] = er - oi;
        z[2 * rk + 1] = ei + or_;
        if (j != k && j < half) {
            /* E[j] = conj(E[k]) and O[j] = conj(O[k]) (the difference and
             * the twiddle of j are both minus the conjugates of k's). */
            int rj = f->bitrev[j];
            z[2 * rj] = er + oi;
            z[2 * rj + 1] = or_ - ei;
        }
    }
    complex_fft(f, 1);
    const float scale = 1.0f / (float)f->n;
    for (int m = 0; m < half; m++) {
        x[2 * m] = z[2 * m] * scale;
        x[2 * m + 1] = z[2 * m + 1] * scale;
    }
}
