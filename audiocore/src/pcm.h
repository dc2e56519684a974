/* Samples as every kernel sees them (docs/audio.md), once: the format codes,
 * the channel limit, PCM16's byte order, and the PCM policy: f32 -> s16
 * clips to [-1, 1], scales by 32767 in float32, rounds half to even,
 * NaN -> 0; s16 -> f32 multiplies by 1/32768.
 *
 * Every path below computes the same float32 product and rounds it half to
 * even: the x86-64 and scalar paths in the current rounding mode (that one
 * unless the embedding process changed it; Python never does), NEON with
 * FCVTNS, which rounds to nearest-even whatever the mode.  So all paths are
 * bit-identical. */
#ifndef AUDIOCORE_PCM_H
#define AUDIOCORE_PCM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "simd.h"

enum ac_sample_format {
    AC_FORMAT_F32 = 0, /* float32 in native byte order */
    AC_FORMAT_S16 = 1, /* int16, little-endian */
    AC_FORMAT_ULAW = 2, /* G.711 μ-law, one byte a sample (g711.h) */
    AC_FORMAT_ALAW = 3  /* G.711 A-law */
};

/* Interleaved frames hold at most this many channels, in every kernel and
 * in the Python API (audiocore's MAX_CHANNELS).  Voice is mono or stereo;
 * 64 also holds mic arrays and ambisonics up to 7th order, and bounds the
 * frame of float scratch the jitter core keeps on the stack. */
#define AC_MAX_CHANNELS 64

/* ---- PCM16 byte order ----------------------------------------------------
 * Every kernel reads and writes PCM16 through these, so a big-endian host
 * swaps at exactly the places where samples cross to or from a caller's
 * buffer.  They take byte pointers: a caller's buffer may start at any byte.
 * (The vector paths load little-endian lanes directly; simd.h.) */

static inline uint16_t ac_pcm16_order(uint16_t u)
{
#if AC_PCM16_SWAP
    return (uint16_t)((u >> 8) | (u << 8));
#else
    return u;
#endif
}

/* One sample at `p` (little-endian) in native order. */
static inline int16_t ac_load_s16le(const void *p)
{
    uint16_t u;
    memcpy(&u, p, sizeof u);
    return (int16_t)ac_pcm16_order(u);
}

/* Stores `v` at `p` in little-endian order. */
static inline void ac_store_s16le(void *p, int16_t v)
{
    uint16_t u = ac_pcm16_order((uint16_t)v);
    memcpy(p, &u, sizeof u);
}

/* `n` little-endian samples at `src` into native int16 at `dst`; `dst` may
 * be `src` (then the samples are reordered in place). */
static inline void ac_load_s16le_n(int16_t *dst, const void *src, size_t n)
{
#if AC_PCM16_SWAP
    for (size_t i = 0; i < n; i++)
        dst[i] = ac_load_s16le((const unsigned char *)src + 2 * i);
#else
    if ((const void *)dst != src)
        memcpy(dst, src, n * sizeof(int16_t));
#endif
}

/* `n` native int16 at `src` to little-endian at `dst`; `dst` may be `src`. */
static inline void ac_store_s16le_n(void *dst, const int16_t *src, size_t n)
{
#if AC_PCM16_SWAP
    for (size_t i = 0; i < n; i++)
        ac_store_s16le((unsigned char *)dst + 2 * i, src[i]);
#else
    if (dst != (const void *)src)
        memcpy(dst, src, n * sizeof(int16_t));
#endif
}

/* ---- the PCM policy ---------------------------------------------------- */

#define AC_PCM16_SCALE 32767.0f
#define AC_PCM16_INV 0.000030517578125f /* 1/32768, exact in float32 */

static inline int16_t ac_pcm16_from_f32(float x)
{
    x = (x == x) ? x : 0.0f; /* NaN -> 0 */
    x = x > 1.0f ? 1.0f : x;
    x = x < -1.0f ? -1.0f : x;
    float v = x * AC_PCM16_SCALE;
    /* Round in the current mode without a libm call, so that loops of this
     * vectorise (lrintf does not): adding 1.5 * 2^23 puts |v| <= 32767 where
     * float32 has no fraction bits, and subtracting it back is exact. */
    v = (v + 12582912.0f) - 12582912.0f;
    return (int16_t)v;
}

static inline float ac_f32_from_pcm16(int16_t s)
{
    return (float)s * AC_PCM16_INV;
}

#if AC_X86_64
#include <immintrin.h>

/* Each returns int32 lanes already in [-32767, 32767]: packing them to
 * int16 with or without saturation gives the same result. */

static inline __m128i ac_sse2_pcm16_i32(__m128 x)
{
    x = _mm_and_ps(x, _mm_cmpord_ps(x, x)); /* NaN -> +0 */
    x = _mm_min_ps(_mm_max_ps(x, _mm_set1_ps(-1.0f)), _mm_set1_ps(1.0f));
    return _mm_cvtps_epi32(_mm_mul_ps(x, _mm_set1_ps(AC_PCM16_SCALE)));
}

AC_TARGET_AVX2 static inline __m256i ac_avx2_pcm16_i32(__m256 x)
{
    x = _mm256_and_ps(x, _mm256_cmp_ps(x, x, _CMP_ORD_Q));
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-1.0f)), _mm256_set1_ps(1.0f));
    return _mm256_cvtps_epi32(_mm256_mul_ps(x, _mm256_set1_ps(AC_PCM16_SCALE)));
}

AC_TARGET_AVX512 static inline __m512i ac_avx512_pcm16_i32(__m512 x)
{
    x = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, x, _CMP_ORD_Q), x);
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-1.0f)), _mm512_set1_ps(1.0f));
    return _mm512_cvtps_epi32(_mm512_mul_ps(x, _mm512_set1_ps(AC_PCM16_SCALE)));
}
#endif

#if AC_AARCH64
#include <arm_neon.h>

/* int32 lanes in [-32767, 32767], as the x86-64 helpers above.  FMAX and
 * FMIN would pass a NaN on, so it is zeroed first: a lane that is not equal
 * to itself is masked to +0. */
static inline int32x4_t ac_neon_pcm16_i32(float32x4_t x)
{
    uint32x4_t ordered = vceqq_f32(x, x);
    x = vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(x), ordered));
    x = vminq_f32(vmaxq_f32(x, vdupq_n_f32(-1.0f)), vdupq_n_f32(1.0f));
    return vcvtnq_s32_f32(vmulq_f32(x, vdupq_n_f32(AC_PCM16_SCALE)));
}
#endif

#endif
