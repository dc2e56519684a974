#include "convert.h"

#include <string.h>

#include "pcm.h"
#include "simd.h"

typedef void (*convert_fn)(const void *, void *, ptrdiff_t);

/* The scalar loops go through memcpy and pcm.h's PCM16 loads and stores,
 * so that unaligned pointers are legal C and a big-endian host swaps;
 * compilers turn each into a single load or store. */

static void f32_to_s16_scalar(const void *src, void *dst, ptrdiff_t n)
{
    const unsigned char *s = src;
    unsigned char *d = dst;
    for (ptrdiff_t i = 0; i < n; i++) {
        float x;
        memcpy(&x, s + 4 * i, 4);
        ac_store_s16le(d + 2 * i, ac_pcm16_from_f32(x));
    }
}

static void s16_to_f32_scalar(const void *src, void *dst, ptrdiff_t n)
{
    const unsigned char *s = src;
    unsigned char *d = dst;
    for (ptrdiff_t i = 0; i < n; i++) {
        float y = ac_f32_from_pcm16(ac_load_s16le(s + 2 * i));
        memcpy(d + 4 * i, &y, 4);
    }
}

#if AC_X86_64

static void f32_to_s16_sse2(const void *src, void *dst, ptrdiff_t n)
{
    const float *s = src;
    int16_t *d = dst;
    ptrdiff_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i lo = ac_sse2_pcm16_i32(_mm_loadu_ps(s + i));
        __m128i hi = ac_sse2_pcm16_i32(_mm_loadu_ps(s + i + 4));
        _mm_storeu_si128((__m128i *)(d + i), _mm_packs_epi32(lo, hi));
    }
    f32_to_s16_scalar(s + i, d + i, n - i);
}

static void s16_to_f32_sse2(const void *src, void *dst, ptrdiff_t n)
{
    const int16_t *s = src;
    float *d = dst;
    const __m128 scale = _mm_set1_ps(AC_PCM16_INV);
    ptrdiff_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i v = _mm_loadu_si128((const __m128i *)(s + i));
        /* Sign-extend by unpacking into the high half, then shifting down. */
        __m128i lo = _mm_srai_epi32(_mm_unpacklo_epi16(v, v), 16);
        __m128i hi = _mm_srai_epi32(_mm_unpackhi_epi16(v, v), 16);
        _mm_storeu_ps(d + i, _mm_mul_ps(_mm_cvtepi32_ps(lo), scale));
        _mm_storeu_ps(d + i + 4, _mm_mul_ps(_mm_cvtepi32_ps(hi), scale));
    }
    s16_to_f32_scalar(s + i, d + i, n - i);
}

AC_TARGET_AVX2 static void f32_to_s16_avx2(const void *src, void *dst, ptrdiff_t n)
{
    const float *s = src;
    int16_t *d = dst;
    ptrdiff_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i lo = ac_avx2_pcm16_i32(_mm256_loadu_ps(s + i));
        __m256i hi = ac_avx2_pcm16_i32(_mm256_loadu_ps(s + i + 8));
        /* packs works per 128-bit lane; the permute restores sample order. */
        __m256i packed = _mm256_permute4x64_epi64(_mm256_packs_epi32(lo, hi), 0xD8);
        _mm256_storeu_si256((__m256i *)(d + i), packed);
    }
    f32_to_s16_sse2(s + i, d + i, n - i);
}

AC_TARGET_AVX2 static void s16_to_f32_avx2(const void *src, void *dst, ptrdiff_t n)
{
    const int16_t *s = src;
    float *d = dst;
    const __m256 scale = _mm256_set1_ps(AC_PCM16_INV);
    ptrdiff_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i lo = _mm256_cvtepi16_epi32(_mm_loadu_si128((const __m128i *)(s + i)));
        __m256i hi = _mm256_cvtepi16_epi32(_mm_loadu_si128((const __m128i *)(s + i + 8)));
        _mm256_storeu_ps(d + i, _mm256_mul_ps(_mm256_cvtepi32_ps(lo), scale));
        _mm256_storeu_ps(d + i + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(hi), scale));
    }
    s16_to_f32_sse2(s + i, d + i, n - i);
}

/* AVX-512 finishes with a masked tail instead of falling back, so short
 * buffers (a 20 ms chunk is 960 samples) never reach narrower code. */
AC_TARGET_AVX512 static void f32_to_s16_avx512(const void *src, void *dst, ptrdiff_t n)
{
    const float *s = src;
    int16_t *d = dst;
    ptrdiff_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i lo = _mm512_cvtsepi32_epi16(ac_avx512_pcm16_i32(_mm512_loadu_ps(s + i)));
        __m256i hi = _mm512_cvtsepi32_epi16(ac_avx512_pcm16_i32(_mm512_loadu_ps(s + i + 16)));
        _mm256_storeu_si256((__m256i *)(d + i), lo);
        _mm256_storeu_si256((__m256i *)(d + i + 16), hi);
    }
    for (; i < n; i += 16) {
        ptrdiff_t left = n - i;
        __mmask16 m = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u);
        __m512i v = ac_avx512_pcm16_i32(_mm512_maskz_loadu_ps(m, s + i));
        _mm512_mask_cvtsepi32_storeu_epi16(d + i, m, v);
    }
}

AC_TARGET_AVX512 static void s16_to_f32_avx512(const void *src, void *dst, ptrdiff_t n)
{
    const int16_t *s = src;
    float *d = dst;
    const __m512 scale = _mm512_set1_ps(AC_PCM16_INV);
    ptrdiff_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512i lo = _mm512_cvtepi16_epi32(_mm256_loadu_si256((const __m256i *)(s + i)));
        __m512i hi = _mm512_cvtepi16_epi32(_mm256_loadu_si256((const __m256i *)(s + i + 16)));
        _mm512_storeu_ps(d + i, _mm512_mul_ps(_mm512_cvtepi32_ps(lo), scale));
        _mm512_storeu_ps(d + i + 16, _mm512_mul_ps(_mm512_cvtepi32_ps(hi), scale));
    }
    for (; i < n; i += 16) {
        ptrdiff_t left = n - i;
        __mmask16 m = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u);
        __m512i v = _mm512_cvtepi16_epi32(_mm256_maskz_loadu_epi16(m, s + i));
        _mm512_mask_storeu_ps(d + i, m, _mm512_mul_ps(_mm512_cvtepi32_ps(v), scale));
    }
}

#endif

#if AC_AARCH64

/* NEON loads and stores bytes, then reinterprets the lanes: legal C at any
 * alignment (the caller's slice may start at an odd byte), and LD1/ST1 of
 * bytes cost what wider ones do. */

static void f32_to_s16_neon(const void *src, void *dst, ptrdiff_t n)
{
    const uint8_t *s = src;
    uint8_t *d = dst;
    ptrdiff_t i = 0;
    for (; i + 8 <= n; i += 8) {
        int32x4_t lo = ac_neon_pcm16_i32(vreinterpretq_f32_u8(vld1q_u8(s + 4 * i)));
        int32x4_t hi = ac_neon_pcm16_i32(vreinterpretq_f32_u8(vld1q_u8(s + 4 * i + 16)));
        int16x8_t v = vcombine_s16(vqmovn_s32(lo), vqmovn_s32(hi));
        vst1q_u8(d + 2 * i, vreinterpretq_u8_s16(v));
    }
    f32_to_s16_scalar(s + 4 * i, d + 2 * i, n - i);
}

static void s16_to_f32_neon(const void *src, void *dst, ptrdiff_t n)
{
    const uint8_t *s = src;
    uint8_t *d = dst;
    const float32x4_t scale = vdupq_n_f32(AC_PCM16_INV);
    ptrdiff_t i = 0;
    for (; i + 8 <= n; i += 8) {
        int16x8_t v = vreinterpretq_s16_u8(vld1q_u8(s + 2 * i));
        float32x4_t lo = vcvtq_f32_s32(vmovl_s16(vget_low_s16(v)));
        float32x4_t hi = vcvtq_f32_s32(vmovl_high_s16(v));
        vst1q_u8(d + 4 * i, vreinterpretq_u8_f32(vmulq_f32(lo, scale)));
        vst1q_u8(d + 4 * i + 16, vreinterpretq_u8_f32(vmulq_f32(hi, scale)));
    }
    s16_to_f32_scalar(s + 2 * i, d + 4 * i, n - i);
}

#endif

/* Indexed by enum ac_path; a path this build has no code for stays NULL. */
static const convert_fn to_s16_paths[AC_PATH_COUNT] = {
    [AC_PATH_SCALAR] = f32_to_s16_scalar,
#if AC_X86_64
    [AC_PATH_SSE2] = f32_to_s16_sse2,
    [AC_PATH_AVX2] = f32_to_s16_avx2,
    [AC_PATH_AVX512] = f32_to_s16_avx512,
#endif
#if AC_AARCH64
    [AC_PATH_NEON] = f32_to_s16_neon,
#endif
};
static const convert_fn to_f32_paths[AC_PATH_COUNT] = {
    [AC_PATH_SCALAR] = s16_to_f32_scalar,
#if AC_X86_64
    [AC_PATH_SSE2] = s16_to_f32_sse2,
    [AC_PATH_AVX2] = s16_to_f32_avx2,
    [AC_PATH_AVX512] = s16_to_f32_avx512,
#endif
#if AC_AARCH64
    [AC_PATH_NEON] = s16_to_f32_neon,
#endif
};

static int current_path = AC_PATH_SCALAR;
static convert_fn to_s16 = f32_to_s16_scalar;
static convert_fn to_f32 = s16_to_f32_scalar;

int ac_convert_set_path(int path)
{
    if (path < 0 || path >= AC_PATH_COUNT || to_s16_paths[path] == NULL ||
        !ac_path_supported(path))
        return -1;
    to_s16 = to_s16_paths[path];
    to_f32 = to_f32_paths[path];
    current_path = path;
    return 0;
}

int ac_convert_get_path(void)
{
    return current_path;
}

void ac_f32_to_s16(const void *src, void *dst, ptrdiff_t n)
{
    to_s16(src, dst, n);
}

void ac_s16_to_f32(const void *src, void *dst, ptrdiff_t n)
{
    to_f32(src, dst, n);
}
