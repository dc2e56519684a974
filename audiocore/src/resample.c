#include "resample.h"

#include <stdlib.h>
#include <string.h>

#include "g711.h"
#include "pcm.h"
#include "simd.h"

#if defined(__GNUC__) || defined(__clang__)
#define AC_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define AC_ALWAYS_INLINE __forceinline
#endif

/* Input frames staged per inner round: small enough that the working
 * buffer of a stereo stream stays in L1, large enough that the memmove of
 * the history after each round is noise. */
#define BLOCK_FRAMES 2048

/* Outputs computed together: four independent dot products, two
 * accumulators each, keep both FMA pipes busy despite their latency. */
#define GROUP 4

/* G.711 output is filtered to PCM16 in pieces of at most this many samples
 * on the stack, then encoded (8 KiB). */
#define CODEC_SAMPLES 4096

typedef void (*fir_kernel)(const ac_resampler *r, const float *buf, int64_t j, int phase,
                           int64_t count, unsigned char *out);

struct ac_resampler {
    const float *coefs;
    int up, down, taps, delay, channels, in_format, out_format, path;
    int fir_format;         /* what the kernels store: out_format, or s16 under G.711 */
    const int16_t *decode;  /* G.711 input: the code table; else NULL */
    ac_g711_fn encode;      /* G.711 output: s16 -> codes on this path; else NULL */
    int passthrough;
    fir_kernel kernel;
    int *advance;    /* input frames between an output at phase p and the next */
    int *next_phase; /* phase of the output after one at phase p */
    float *work;     /* `channels` planar buffers of `cap` frames each */
    int64_t cap;
    int64_t fill;   /* frames held in each planar buffer */
    int64_t next_j; /* buffer index of the newest frame the next output needs */
    int phase;      /* phase of the next output */
    uint64_t frames_in, frames_out;
};

static inline size_t format_size(int format)
{
    return format == AC_FORMAT_F32 ? 4 : format == AC_FORMAT_S16 ? 2 : 1;
}

static inline int is_g711(int format)
{
    return format == AC_FORMAT_ULAW || format == AC_FORMAT_ALAW;
}

/* Loads and stores through memcpy (and pcm.h for PCM16): a buffer handed
 * over from Python may start at any byte (a memoryview slice of bytes). */
static inline float load_f32(const unsigned char *p)
{
    float v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void store_output(const ac_resampler *r, unsigned char *out, int64_t index, float y)
{
    if (r->fir_format == AC_FORMAT_S16)
        ac_store_s16le(out + (size_t)index * r->channels * 2, ac_pcm16_from_f32(y));
    else
        memcpy(out + (size_t)index * r->channels * 4, &y, 4);
}

/* ---- kernels ----------------------------------------------------------
 * Each computes `count` outputs of one channel, starting with the output
 * whose newest input is buf[j] and whose phase is `phase`, and writes
 * output i to frame i of `out` (already offset to the channel).  The
 * summation order of an output depends only on the path, never on its
 * neighbours or on the call, which is what makes chunking irrelevant. */

static void fir_scalar(const ac_resampler *r, const float *buf, int64_t j, int phase,
                       int64_t count, unsigned char *out)
{
    const int taps = r->taps;
    for (int64_t i = 0; i < count; i++) {
        const float *x = buf + j - (taps - 1);
        const float *h = r->coefs + (size_t)phase * taps;
        float acc[8] = {0};
        for (int k = 0; k < taps; k += 8)
            for (int q = 0; q < 8; q++)
                acc[q] += x[k + q] * h[k + q];
        float y = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
        store_output(r, out, i, y);
        j += r->advance[phase];
        phase = r->next_phase[phase];
    }
}

#if AC_X86_64 || AC_AARCH64

/* Window and filter row of the next GROUP outputs (`left` >= 1 of them
 * remain in the run); past the end of the run the group is padded with
 * copies of its first output, computed and not stored, so a lone output is
 * summed exactly as it would be in a group. */
static AC_ALWAYS_INLINE int next_group(const ac_resampler *r, const float *buf, int64_t *j,
                                       int *phase, int64_t left, const float **x,
                                       const float **h)
{
    int valid = left < GROUP ? (int)left : GROUP;
    for (int q = 0; q < GROUP; q++) {
        /* Output 0 always exists; saying so (q == 0) also shows the
         * compiler that the copies below read a set pointer. */
        if (q == 0 || q < valid) {
            x[q] = buf + *j - (r->taps - 1);
            h[q] = r->coefs + (size_t)*phase * r->taps;
            *j += r->advance[*phase];
            *phase = r->next_phase[*phase];
        } else {
            x[q] = x[0];
            h[q] = h[0];
        }
    }
    return valid;
}

#endif

#if AC_X86_64

/* Stores four sums; the PCM policy comes from pcm.h (SSE2 is baseline). */
static AC_ALWAYS_INLINE void store_group(const ac_resampler *r, unsigned char *out, int64_t i,
                                         __m128 s, int valid)
{
    const int stride = r->channels;
    if (r->fir_format == AC_FORMAT_S16) {
        __m128i v = _mm_packs_epi32(ac_sse2_pcm16_i32(s), _mm_setzero_si128());
        unsigned char *o = out + (size_t)i * stride * 2;
        if (valid == GROUP && stride == 1) {
            _mm_storel_epi64((__m128i *)o, v);
            return;
        }
        int16_t tmp[8];
        _mm_storeu_si128((__m128i *)tmp, v);
        for (int q = 0; q < valid; q++)
            ac_store_s16le(o + (size_t)q * stride * 2, tmp[q]);
    } else {
        unsigned char *o = out + (size_t)i * stride * 4;
        if (valid == GROUP && stride == 1) {
            _mm_storeu_ps((float *)o, s);
            return;
        }
        float tmp[4];
        _mm_storeu_ps(tmp, s);
        for (int q = 0; q < valid; q++)
            memcpy(o + (size_t)q * stride * 4, &tmp[q], 4);
    }
}

/* -- SSE2 -- */

static AC_ALWAYS_INLINE __m128 hsum4_sse2(__m128 a, __m128 b, __m128 c, __m128 d)
{
    __m128 ab = _mm_add_ps(_mm_unpacklo_ps(a, b), _mm_unpackhi_ps(a, b));
    __m128 cd = _mm_add_ps(_mm_unpacklo_ps(c, d), _mm_unpackhi_ps(c, d));
    return _mm_add_ps(_mm_movelh_ps(ab, cd), _mm_movehl_ps(cd, ab));
}

static AC_ALWAYS_INLINE __m128 dot4_sse2(const float **x, const float **h, int taps,
                                         const int shared)
{
    __m128 acc[GROUP][2];
    for (int q = 0; q < GROUP; q++)
        acc[q][0] = acc[q][1] = _mm_setzero_ps();
    for (int k = 0; k < taps; k += 8) {
        __m128 h0 = _mm_loadu_ps(h[0] + k), h1 = _mm_loadu_ps(h[0] + k + 4);
        for (int q = 0; q < GROUP; q++) {
            if (!shared && q > 0) {
                h0 = _mm_loadu_ps(h[q] + k);
                h1 = _mm_loadu_ps(h[q] + k + 4);
            }
            acc[q][0] = _mm_add_ps(acc[q][0], _mm_mul_ps(_mm_loadu_ps(x[q] + k), h0));
            acc[q][1] = _mm_add_ps(acc[q][1], _mm_mul_ps(_mm_loadu_ps(x[q] + k + 4), h1));
        }
    }
    return hsum4_sse2(_mm_add_ps(acc[0][0], acc[0][1]), _mm_add_ps(acc[1][0], acc[1][1]),
                      _mm_add_ps(acc[2][0], acc[2][1]), _mm_add_ps(acc[3][0], acc[3][1]));
}

static void fir_sse2(const ac_resampler *r, const float *buf, int64_t j, int phase, int64_t count,
                     unsigned char *out)
{
    const float *x[GROUP], *h[GROUP];
    const int shared = r->up == 1; /* one phase: every output uses row 0 */
    for (int64_t i = 0; i < count; i += GROUP) {
        int valid = next_group(r, buf, &j, &phase, count - i, x, h);
        __m128 s = shared ? dot4_sse2(x, h, r->taps, 1) : dot4_sse2(x, h, r->taps, 0);
        store_group(r, out, i, s, valid);
    }
}

/* -- AVX2 + FMA -- */

AC_TARGET_AVX2 static AC_ALWAYS_INLINE __m128 hsum4_avx2(__m256 a, __m256 b, __m256 c, __m256 d)
{
    __m256 ab = _mm256_add_ps(_mm256_unpacklo_ps(a, b), _mm256_unpackhi_ps(a, b));
    __m256 cd = _mm256_add_ps(_mm256_unpacklo_ps(c, d), _mm256_unpackhi_ps(c, d));
    __m256 s = _mm256_add_ps(_mm256_shuffle_ps(ab, cd, _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm256_shuffle_ps(ab, cd, _MM_SHUFFLE(3, 2, 3, 2)));
    return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

AC_TARGET_AVX2 static AC_ALWAYS_INLINE __m128 dot4_avx2(const float **x, const float **h,
                                                        int taps, const int shared)
{
    __m256 acc[GROUP][2];
    for (int q = 0; q < GROUP; q++)
        acc[q][0] = acc[q][1] = _mm256_setzero_ps();
    for (int k = 0; k < taps; k += 16) {
        __m256 h0 = _mm256_loadu_ps(h[0] + k), h1 = _mm256_loadu_ps(h[0] + k + 8);
        for (int q = 0; q < GROUP; q++) {
            if (!shared && q > 0) {
                h0 = _mm256_loadu_ps(h[q] + k);
                h1 = _mm256_loadu_ps(h[q] + k + 8);
            }
            acc[q][0] = _mm256_fmadd_ps(_mm256_loadu_ps(x[q] + k), h0, acc[q][0]);
            acc[q][1] = _mm256_fmadd_ps(_mm256_loadu_ps(x[q] + k + 8), h1, acc[q][1]);
        }
    }
    return hsum4_avx2(
        _mm256_add_ps(acc[0][0], acc[0][1]), _mm256_add_ps(acc[1][0], acc[1][1]),
        _mm256_add_ps(acc[2][0], acc[2][1]), _mm256_add_ps(acc[3][0], acc[3][1]));
}

AC_TARGET_AVX2 static void fir_avx2(const ac_resampler *r, const float *buf, int64_t j, int phase,
                                    int64_t count, unsigned char *out)
{
    const float *x[GROUP], *h[GROUP];
    const int shared = r->up == 1;
    for (int64_t i = 0; i < count; i += GROUP) {
        int valid = next_group(r, buf, &j, &phase, count - i, x, h);
        __m128 s = shared ? dot4_avx2(x, h, r->taps, 1) : dot4_avx2(x, h, r->taps, 0);
        store_group(r, out, i, s, valid);
    }
}

/* Upsampling by exactly 2 (8 -> 16 kHz, the phone's way in): an output at
 * phase 0 and the next, at phase 1, read one window with the two rows, so
 * four outputs from phase 0 need two windows and two rows where the
 * general kernel loads four of each (0.97 -> 0.61 µs per 20 ms chunk).  Each output is summed exactly as
 * dot4_avx2 sums it (same accumulators, same reduction), so the stream is
 * bit for bit the general kernel's under any chunking. */
AC_TARGET_AVX2 static AC_ALWAYS_INLINE __m128 dot4_twice_avx2(const float *xa, const float *xb,
                                                              const float *h0, const float *h1,
                                                              int taps)
{
    __m256 acc[GROUP][2];
    for (int q = 0; q < GROUP; q++)
        acc[q][0] = acc[q][1] = _mm256_setzero_ps();
    for (int k = 0; k < taps; k += 16) {
        __m256 r00 = _mm256_loadu_ps(h0 + k), r01 = _mm256_loadu_ps(h0 + k + 8);
        __m256 r10 = _mm256_loadu_ps(h1 + k), r11 = _mm256_loadu_ps(h1 + k + 8);
        __m256 a0 = _mm256_loadu_ps(xa + k), a1 = _mm256_loadu_ps(xa + k + 8);
        __m256 b0 = _mm256_loadu_ps(xb + k), b1 = _mm256_loadu_ps(xb + k + 8);
        acc[0][0] = _mm256_fmadd_ps(a0, r00, acc[0][0]);
        acc[0][1] = _mm256_fmadd_ps(a1, r01, acc[0][1]);
        acc[1][0] = _mm256_fmadd_ps(a0, r10, acc[1][0]);
        acc[1][1] = _mm256_fmadd_ps(a1, r11, acc[1][1]);
        acc[2][0] = _mm256_fmadd_ps(b0, r00, acc[2][0]);
        acc[2][1] = _mm256_fmadd_ps(b1, r01, acc[2][1]);
        acc[3][0] = _mm256_fmadd_ps(b0, r10, acc[3][0]);
        acc[3][1] = _mm256_fmadd_ps(b1, r11, acc[3][1]);
    }
    return hsum4_avx2(
        _mm256_add_ps(acc[0][0], acc[0][1]), _mm256_add_ps(acc[1][0], acc[1][1]),
        _mm256_add_ps(acc[2][0], acc[2][1]), _mm256_add_ps(acc[3][0], acc[3][1]));
}

AC_TARGET_AVX2 static void fir_twice_avx2(const ac_resampler *r, const float *buf, int64_t j,
                                          int phase, int64_t count, unsigned char *out)
{
    const float *x[GROUP], *h[GROUP];
    const float *h0 = r->coefs, *h1 = r->coefs + r->taps;
    int64_t i = 0;
    if (phase == 1 && count > 0) { /* one output to reach phase 0, as the general kernel */
        next_group(r, buf, &j, &phase, 1, x, h);
        store_group(r, out, 0, dot4_avx2(x, h, r->taps, 0), 1);
        i = 1;
    }
    for (; i + GROUP <= count; i += GROUP, j += 2) {
        const float *xa = buf + j - (r->taps - 1);
        store_group(r, out, i, dot4_twice_avx2(xa, xa + 1, h0, h1, r->taps), GROUP);
    }
    for (; i < count; i += GROUP) {
        int valid = next_group(r, buf, &j, &phase, count - i, x, h);
        store_group(r, out, i, dot4_avx2(x, h, r->taps, 0), valid);
    }
}

/* -- AVX-512 -- */

AC_TARGET_AVX512 static AC_ALWAYS_INLINE __m128 hsum4_avx512(__m512 a, __m512 b, __m512 c,
                                                             __m512 d)
{
    __m512 ab = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
    __m512 cd = _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
    __m512 s = _mm512_add_ps(_mm512_shuffle_ps(ab, cd, _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(ab, cd, _MM_SHUFFLE(3, 2, 3, 2)));
    __m256 lo = _mm512_castps512_ps256(s);
    __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1));
    __m256 u = _mm256_add_ps(lo, hi);
    return _mm_add_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1));
}

AC_TARGET_AVX512 static AC_ALWAYS_INLINE __m128 dot4_avx512(const float **x, const float **h,
                                                            int taps, const int shared)
{
    __m512 acc[GROUP][2];
    for (int q = 0; q < GROUP; q++)
        acc[q][0] = acc[q][1] = _mm512_setzero_ps();
    int k = 0;
    for (; k + 32 <= taps; k += 32) {
        __m512 h0 = _mm512_loadu_ps(h[0] + k), h1 = _mm512_loadu_ps(h[0] + k + 16);
        for (int q = 0; q < GROUP; q++) {
            if (!shared && q > 0) {
                h0 = _mm512_loadu_ps(h[q] + k);
                h1 = _mm512_loadu_ps(h[q] + k + 16);
            }
            acc[q][0] = _mm512_fmadd_ps(_mm512_loadu_ps(x[q] + k), h0, acc[q][0]);
            acc[q][1] = _mm512_fmadd_ps(_mm512_loadu_ps(x[q] + k + 16), h1, acc[q][1]);
        }
    }
    if (k < taps) { /* rows are a multiple of 16 long: at most one block left */
        __m512 h0 = _mm512_loadu_ps(h[0] + k);
        for (int q = 0; q < GROUP; q++) {
            if (!shared && q > 0)
                h0 = _mm512_loadu_ps(h[q] + k);
            acc[q][0] = _mm512_fmadd_ps(_mm512_loadu_ps(x[q] + k), h0, acc[q][0]);
        }
    }
    return hsum4_avx512(
        _mm512_add_ps(acc[0][0], acc[0][1]), _mm512_add_ps(acc[1][0], acc[1][1]),
        _mm512_add_ps(acc[2][0], acc[2][1]), _mm512_add_ps(acc[3][0], acc[3][1]));
}

AC_TARGET_AVX512 static void fir_avx512(const ac_resampler *r, const float *buf, int64_t j,
                                        int phase, int64_t count, unsigned char *out)
{
    const float *x[GROUP], *h[GROUP];
    const int shared = r->up == 1;
    for (int64_t i = 0; i < count; i += GROUP) {
        int valid = next_group(r, buf, &j, &phase, count - i, x, h);
        __m128 s = shared ? dot4_avx512(x, h, r->taps, 1) : dot4_avx512(x, h, r->taps, 0);
        store_group(r, out, i, s, valid);
    }
}

#endif /* AC_X86_64 */

#if AC_AARCH64

/* -- NEON: the SSE2 kernel's shape, with fused multiply-adds (as AVX2) -- */

/* The `valid` first of a group's outputs, one by one, to frames i, i + 1, ...
 * of `out`: store_group_neon's way for a partial group or interleaved output
 * (the x86-64 store_group spells the same loops out; it stays as it was
 * measured).  `lanes` holds int16 or float32 samples, as the output format. */
static AC_ALWAYS_INLINE void store_lanes(const ac_resampler *r, unsigned char *out, int64_t i,
                                         const void *lanes, int valid)
{
    const int stride = r->channels;
    if (r->fir_format == AC_FORMAT_S16) {
        const int16_t *s = lanes;
        unsigned char *o = out + (size_t)i * stride * 2;
        for (int q = 0; q < valid; q++)
            ac_store_s16le(o + (size_t)q * stride * 2, s[q]);
    } else {
        const float *y = lanes;
        unsigned char *o = out + (size_t)i * stride * 4;
        for (int q = 0; q < valid; q++)
            memcpy(o + (size_t)q * stride * 4, &y[q], 4);
    }
}

/* Stores through byte pointers: `out` may start at any byte. */
static AC_ALWAYS_INLINE void store_group_neon(const ac_resampler *r, unsigned char *out,
                                              int64_t i, float32x4_t s, int valid)
{
    const int whole = valid == GROUP && r->channels == 1;
    if (r->fir_format == AC_FORMAT_S16) {
        int16x4_t v = vqmovn_s32(ac_neon_pcm16_i32(s));
        if (whole) {
            vst1_u8(out + (size_t)i * 2, vreinterpret_u8_s16(v));
            return;
        }
        int16_t tmp[4];
        vst1_s16(tmp, v);
        store_lanes(r, out, i, tmp, valid);
    } else {
        if (whole) {
            vst1q_u8(out + (size_t)i * 4, vreinterpretq_u8_f32(s));
            return;
        }
        float tmp[4];
        vst1q_f32(tmp, s);
        store_lanes(r, out, i, tmp, valid);
    }
}

static AC_ALWAYS_INLINE float32x4_t dot4_neon(const float **x, const float **h, int taps,
                                              const int shared)
{
    float32x4_t acc[GROUP][2];
    for (int q = 0; q < GROUP; q++)
        acc[q][0] = acc[q][1] = vdupq_n_f32(0.0f);
    for (int k = 0; k < taps; k += 8) {
        float32x4_t h0 = vld1q_f32(h[0] + k), h1 = vld1q_f32(h[0] + k + 4);
        for (int q = 0; q < GROUP; q++) {
            if (!shared && q > 0) {
                h0 = vld1q_f32(h[q] + k);
                h1 = vld1q_f32(h[q] + k + 4);
            }
            acc[q][0] = vfmaq_f32(acc[q][0], vld1q_f32(x[q] + k), h0);
            acc[q][1] = vfmaq_f32(acc[q][1], vld1q_f32(x[q] + k + 4), h1);
        }
    }
    /* Pairwise adds: lane q of the result is output q's sum. */
    float32x4_t s01 = vpaddq_f32(vaddq_f32(acc[0][0], acc[0][1]), vaddq_f32(acc[1][0], acc[1][1]));
    float32x4_t s23 = vpaddq_f32(vaddq_f32(acc[2][0], acc[2][1]), vaddq_f32(acc[3][0], acc[3][1]));
    return vpaddq_f32(s01, s23);
}

static void fir_neon(const ac_resampler *r, const float *buf, int64_t j, int phase, int64_t count,
                     unsigned char *out)
{
    const float *x[GROUP], *h[GROUP];
    const int shared = r->up == 1;
    for (int64_t i = 0; i < count; i += GROUP) {
        int valid = next_group(r, buf, &j, &phase, count - i, x, h);
        float32x4_t s = shared ? dot4_neon(x, h, r->taps, 1) : dot4_neon(x, h, r->taps, 0);
        store_group_neon(r, out, i, s, valid);
    }
}

#endif /* AC_AARCH64 */

/* ---- stream bookkeeping ------------------------------------------------ */

static fir_kernel kernel_for(int path, int up, int down)
{
#if AC_X86_64
    switch (path) {
    case AC_PATH_SSE2:
        return fir_sse2;
    case AC_PATH_AVX2:
        return up == 2 && down == 1 ? fir_twice_avx2 : fir_avx2;
    case AC_PATH_AVX512:
        /* At 32 taps a 512-bit row is one load, and the wider reduction
         * costs more than the loads it saves: 8 -> 16 kHz runs the AVX2
         * kernel for it (0.6 µs per 20 ms against 1.0 on a Zen 5). */
        return up == 2 && down == 1 ? fir_twice_avx2 : fir_avx512;
    default:
        break;
    }
#elif AC_AARCH64
    if (path == AC_PATH_NEON)
        return fir_neon;
#else
    (void)path;
#endif
    (void)up;
    (void)down;
    return fir_scalar;
}

ac_resampler *ac_resampler_new(const float *coefs, int up, int down, int taps, int delay,
                               int channels, int in_format, int out_format, int path)
{
    /* taps * up > down keeps the next window's start inside what is
     * buffered (see compact()); the Python design guarantees it. */
    if (coefs == NULL || up < 1 || down < 1 || taps < AC_RESAMPLE_TAP_ALIGN ||
        taps % AC_RESAMPLE_TAP_ALIGN != 0 || delay < 0 || channels < 1 ||
        channels > AC_MAX_CHANNELS ||
        (int64_t)taps * up <= down || in_format < AC_FORMAT_F32 || in_format > AC_FORMAT_ALAW ||
        out_format < AC_FORMAT_F32 || out_format > AC_FORMAT_ALAW)
        return NULL;
    ac_resampler *r = calloc(1, sizeof *r);
    if (r == NULL)
        return NULL;
    r->coefs = coefs;
    r->up = up;
    r->down = down;
    r->taps = taps;
    r->delay = delay;
    r->channels = channels;
    r->in_format = in_format;
    r->out_format = out_format;
    r->fir_format = is_g711(out_format) ? AC_FORMAT_S16 : out_format;
    r->path = ac_path_supported(path) ? path : AC_PATH_SCALAR;
    r->kernel = kernel_for(r->path, up, down);
    if (is_g711(in_format))
        r->decode = in_format == AC_FORMAT_ULAW ? ac_ulaw_s16 : ac_alaw_s16;
    if (is_g711(out_format))
        r->encode = ac_g711_kernel(r->path, out_format == AC_FORMAT_ULAW ? AC_S16_TO_ULAW
                                                                         : AC_S16_TO_ALAW);
    r->passthrough = up == 1 && down == 1;
    r->cap = taps - 1 + BLOCK_FRAMES;
    r->advance = malloc(sizeof(int) * (size_t)up);
    r->next_phase = malloc(sizeof(int) * (size_t)up);
    r->work = malloc(sizeof(float) * (size_t)r->cap * (size_t)channels);
    if (r->advance == NULL || r->next_phase == NULL || r->work == NULL) {
        ac_resampler_free(r);
        return NULL;
    }
    for (int p = 0; p < up; p++) {
        r->advance[p] = (p + down) / up;
        r->next_phase[p] = (p + down) % up;
    }
    ac_resampler_reset(r);
    return r;
}

void ac_resampler_free(ac_resampler *r)
{
    if (r == NULL)
        return;
    free(r->advance);
    free(r->next_phase);
    free(r->work);
    free(r);
}

void ac_resampler_reset(ac_resampler *r)
{
    /* The stream starts with taps - 1 frames of silence, so output 0 (at
     * input time 0, needing frames up to delay * down / up) is computed
     * like any other: the output is aligned and has no leading ramp. */
    const int64_t centre = (int64_t)r->delay * r->down;
    for (int ch = 0; ch < r->channels; ch++)
        memset(r->work + (size_t)ch * r->cap, 0, sizeof(float) * (size_t)(r->taps - 1));
    r->fill = r->taps - 1;
    r->next_j = r->taps - 1 + centre / r->up;
    r->phase = (int)(centre % r->up);
    r->frames_in = 0;
    r->frames_out = 0;
}

int ac_resampler_path(const ac_resampler *r)
{
    return r->path;
}

/* Outputs whose newest input frame is below `fill`. */
static int64_t determined(const ac_resampler *r, int64_t fill)
{
    int64_t ahead = fill * r->up - (r->next_j * r->up + r->phase);
    return ahead > 0 ? (ahead + r->down - 1) / r->down : 0;
}

int64_t ac_resampler_process_frames(const ac_resampler *r, int64_t in_frames)
{
    return r->passthrough ? in_frames : determined(r, r->fill + in_frames);
}

int64_t ac_resampler_flush_frames(const ac_resampler *r)
{
    if (r->passthrough)
        return 0;
    /* round half up of frames_in * up / down, without overflow */
    uint64_t q = r->frames_in / (uint64_t)r->down, rem = r->frames_in % (uint64_t)r->down;
    uint64_t total = q * (uint64_t)r->up +
                     (2 * rem * (uint64_t)r->up + (uint64_t)r->down) / (2 * (uint64_t)r->down);
    return total > r->frames_out ? (int64_t)(total - r->frames_out) : 0;
}

/* Appends `frames` interleaved frames (or silence when `in` is NULL) to the
 * planar buffers, converting s16 to float32 on the way. */
static void stage(ac_resampler *r, const unsigned char *in, int64_t frames)
{
    const int channels = r->channels;
    for (int ch = 0; ch < channels; ch++) {
        float *dst = r->work + (size_t)ch * r->cap + r->fill;
        if (in == NULL) {
            memset(dst, 0, sizeof(float) * (size_t)frames);
        } else if (r->decode != NULL) {
            /* G.711 is decoded to PCM16, then read as PCM16 is */
            const unsigned char *src = in + ch;
            for (int64_t f = 0; f < frames; f++)
                dst[f] = ac_f32_from_pcm16(r->decode[src[(size_t)f * channels]]);
        } else if (r->in_format == AC_FORMAT_F32) {
            const unsigned char *src = in + (size_t)ch * 4;
            if (channels == 1)
                memcpy(dst, src, sizeof(float) * (size_t)frames);
            else
                for (int64_t f = 0; f < frames; f++)
                    dst[f] = load_f32(src + (size_t)f * channels * 4);
        } else {
            const unsigned char *src = in + (size_t)ch * 2;
            for (int64_t f = 0; f < frames; f++)
                dst[f] = ac_f32_from_pcm16(ac_load_s16le(src + (size_t)f * channels * 2));
        }
    }
    r->fill += frames;
}

/* Runs `count` outputs on every channel, stored as r->fir_format, and moves
 * past them. */
static void fir(ac_resampler *r, int64_t count, unsigned char *out)
{
    const size_t sample = format_size(r->fir_format);
    for (int ch = 0; ch < r->channels; ch++)
        r->kernel(r, r->work + (size_t)ch * r->cap, r->next_j, r->phase, count,
                  out + (size_t)ch * sample);
    int64_t t = r->next_j * r->up + r->phase + count * r->down;
    r->next_j = t / r->up;
    r->phase = (int)(t % r->up);
}

/* Runs `count` outputs on every channel, then drops the frames no later
 * output needs.  Needs next_j >= fill afterwards (every determined output
 * written, or the stream ends here) so the history fits in taps - 1. */
static void run(ac_resampler *r, int64_t count, unsigned char *out)
{
    if (r->encode == NULL) {
        fir(r, count, out);
    } else {
        /* G.711: PCM16 first, then encoded; every output is still the same
         * sum of the same window, so chunking changes nothing. */
        int16_t pcm[CODEC_SAMPLES];
        const int64_t most = CODEC_SAMPLES / r->channels;
        for (int64_t done = 0; done < count;) {
            int64_t piece = count - done < most ? count - done : most;
            fir(r, piece, (unsigned char *)pcm);
            r->encode(pcm, out + (size_t)(done * r->channels), (ptrdiff_t)(piece * r->channels));
            done += piece;
        }
    }
    int64_t start = r->next_j - (r->taps - 1);
    if (start > 0) {
        int64_t keep = r->fill > start ? r->fill - start : 0;
        for (int ch = 0; ch < r->channels; ch++) {
            float *buf = r->work + (size_t)ch * r->cap;
            memmove(buf, buf + start, sizeof(float) * (size_t)keep);
        }
        r->fill = keep;
        r->next_j -= start;
    }
}

/* One sample of a G.711 pass-through as PCM16: codes decoded, float32 by the
 * PCM policy (so that a same-rate stream equals the conversion functions). */
static inline int16_t load_as_s16(const ac_resampler *r, const unsigned char *in, size_t i)
{
    if (r->decode != NULL)
        return r->decode[in[i]];
    if (r->in_format == AC_FORMAT_F32)
        return ac_pcm16_from_f32(load_f32(in + 4 * i));
    return ac_load_s16le(in + 2 * i);
}

static void passthrough(const ac_resampler *r, const unsigned char *in, int64_t frames,
                        unsigned char *out)
{
    const size_t n = (size_t)frames * r->channels;
    if (r->in_format == r->out_format) {
        memcpy(out, in, n * format_size(r->in_format));
    } else if (r->encode != NULL && r->decode == NULL && r->in_format == AC_FORMAT_S16) {
        r->encode(in, out, (ptrdiff_t)n);
    } else if (is_g711(r->in_format) || is_g711(r->out_format)) {
        for (size_t i = 0; i < n; i++) {
            int16_t s = load_as_s16(r, in, i);
            if (r->out_format == AC_FORMAT_S16) {
                ac_store_s16le(out + 2 * i, s);
            } else if (r->out_format == AC_FORMAT_F32) {
                float y = ac_f32_from_pcm16(s);
                memcpy(out + 4 * i, &y, 4);
            } else {
                out[i] = r->out_format == AC_FORMAT_ULAW ? ac_ulaw_from_s16(s)
                                                         : ac_alaw_from_s16(s);
            }
        }
    } else if (r->in_format == AC_FORMAT_F32) {
        for (size_t i = 0; i < n; i++)
            ac_store_s16le(out + 2 * i, ac_pcm16_from_f32(load_f32(in + 4 * i)));
    } else {
        for (size_t i = 0; i < n; i++) {
            float y = ac_f32_from_pcm16(ac_load_s16le(in + 2 * i));
            memcpy(out + 4 * i, &y, 4);
        }
    }
}

int64_t ac_resampler_process(ac_resampler *r, const void *in, int64_t in_frames, void *out)
{
    const unsigned char *src = in;
    unsigned char *dst = out;
    const size_t in_frame = format_size(r->in_format) * r->channels;
    const size_t out_frame = format_size(r->out_format) * r->channels;
    int64_t written = 0;
    if (r->passthrough) {
        passthrough(r, src, in_frames, dst);
        written = in_frames;
    } else {
        while (in_frames > 0) {
            int64_t take = in_frames < BLOCK_FRAMES ? in_frames : BLOCK_FRAMES;
            stage(r, src, take);
            int64_t count = determined(r, r->fill);
            run(r, count, dst + (size_t)written * out_frame);
            written += count;
            src += (size_t)take * in_frame;
            in_frames -= take;
            r->frames_in += (uint64_t)take;
        }
    }
    r->frames_out += (uint64_t)written;
    return written;
}

int64_t ac_resampler_flush(ac_resampler *r, void *out)
{
    unsigned char *dst = out;
    const size_t out_frame = format_size(r->out_format) * r->channels;
    const int64_t need = ac_resampler_flush_frames(r);
    if (need == 0)
        return 0;
    /* Silence up to the newest frame the last output needs, no further, so
     * every round writes all it determines (see run()). */
    int64_t last = (r->next_j * r->up + r->phase + (need - 1) * r->down) / r->up;
    int64_t silence = last + 1 - r->fill;
    int64_t written = 0;
    while (written < need) {
        int64_t take = silence < BLOCK_FRAMES ? silence : BLOCK_FRAMES;
        if (take > 0) {
            stage(r, NULL, take);
            silence -= take;
        }
        int64_t count = determined(r, r->fill);
        if (count > need - written)
            count = need - written;
        run(r, count, dst + (size_t)written * out_frame);
        written += count;
    }
    r->frames_out += (uint64_t)written;
    return written;
}
