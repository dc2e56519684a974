#include "g711.h"

#include <string.h>

#include "simd.h"

#if defined(__GNUC__) || defined(__clang__)
#define AC_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define AC_ALWAYS_INLINE __forceinline
#endif

/* ulaw2lin and alaw2lin of every code: G.711's decoding (for μ-law
 * ((((~c & 0xF) << 3) + 0x84) << seg) - 0x84 with the sign of bit 7; for
 * A-law the segment's base and step), checked against audioop by the tests. */
const int16_t ac_ulaw_s16[256] = {
    -32124, -31100, -30076, -29052, -28028, -27004, -25980, -24956,
    -23932, -22908, -21884, -20860, -19836, -18812, -17788, -16764,
    -15996, -15484, -14972, -14460, -13948, -13436, -12924, -12412,
    -11900, -11388, -10876, -10364,  -9852,  -9340,  -8828,  -8316,
     -7932,  -7676,  -7420,  -7164,  -6908,  -6652,  -6396,  -6140,
     -5884,  -5628,  -5372,  -5116,  -4860,  -4604,  -4348,  -4092,
     -3900,  -3772,  -3644,  -3516,  -3388,  -3260,  -3132,  -3004,
     -2876,  -2748,  -2620,  -2492,  -2364,  -2236,  -2108,  -1980,
     -1884,  -1820,  -1756,  -1692,  -1628,  -1564,  -1500,  -1436,
     -1372,  -1308,  -1244,  -1180,  -1116,  -1052,   -988,   -924,
      -876,   -844,   -812,   -780,   -748,   -716,   -684,   -652,
      -620,   -588,   -556,   -524,   -492,   -460,   -428,   -396,
      -372,   -356,   -340,   -324,   -308,   -292,   -276,   -260,
      -244,   -228,   -212,   -196,   -180,   -164,   -148,   -132,
      -120,   -112,   -104,    -96,    -88,    -80,    -72,    -64,
       -56,    -48,    -40,    -32,    -24,    -16,     -8,      0,
     32124,  31100,  30076,  29052,  28028,  27004,  25980,  24956,
     23932,  22908,  21884,  20860,  19836,  18812,  17788,  16764,
     15996,  15484,  14972,  14460,  13948,  13436,  12924,  12412,
     11900,  11388,  10876,  10364,   9852,   9340,   8828,   8316,
      7932,   7676,   7420,   7164,   6908,   6652,   6396,   6140,
      5884,   5628,   5372,   5116,   4860,   4604,   4348,   4092,
      3900,   3772,   3644,   3516,   3388,   3260,   3132,   3004,
      2876,   2748,   2620,   2492,   2364,   2236,   2108,   1980,
      1884,   1820,   1756,   1692,   1628,   1564,   1500,   1436,
      1372,   1308,   1244,   1180,   1116,   1052,    988,    924,
       876,    844,    812,    780,    748,    716,    684,    652,
       620,    588,    556,    524,    492,    460,    428,    396,
       372,    356,    340,    324,    308,    292,    276,    260,
       244,    228,    212,    196,    180,    164,    148,    132,
       120,    112,    104,     96,     88,     80,     72,     64,
        56,     48,     40,     32,     24,     16,      8,      0,
};

const int16_t ac_alaw_s16[256] = {
     -5504,  -5248,  -6016,  -5760,  -4480,  -4224,  -4992,  -4736,
     -7552,  -7296,  -8064,  -7808,  -6528,  -6272,  -7040,  -6784,
     -2752,  -2624,  -3008,  -2880,  -2240,  -2112,  -2496,  -2368,
     -3776,  -3648,  -4032,  -3904,  -3264,  -3136,  -3520,  -3392,
    -22016, -20992, -24064, -23040, -17920, -16896, -19968, -18944,
    -30208, -29184, -32256, -31232, -26112, -25088, -28160, -27136,
    -11008, -10496, -12032, -11520,  -8960,  -8448,  -9984,  -9472,
    -15104, -14592, -16128, -15616, -13056, -12544, -14080, -13568,
      -344,   -328,   -376,   -360,   -280,   -264,   -312,   -296,
      -472,   -456,   -504,   -488,   -408,   -392,   -440,   -424,
       -88,    -72,   -120,   -104,    -24,     -8,    -56,    -40,
      -216,   -200,   -248,   -232,   -152,   -136,   -184,   -168,
     -1376,  -1312,  -1504,  -1440,  -1120,  -1056,  -1248,  -1184,
     -1888,  -1824,  -2016,  -1952,  -1632,  -1568,  -1760,  -1696,
      -688,   -656,   -752,   -720,   -560,   -528,   -624,   -592,
      -944,   -912,  -1008,   -976,   -816,   -784,   -880,   -848,
      5504,   5248,   6016,   5760,   4480,   4224,   4992,   4736,
      7552,   7296,   8064,   7808,   6528,   6272,   7040,   6784,
      2752,   2624,   3008,   2880,   2240,   2112,   2496,   2368,
      3776,   3648,   4032,   3904,   3264,   3136,   3520,   3392,
     22016,  20992,  24064,  23040,  17920,  16896,  19968,  18944,
     30208,  29184,  32256,  31232,  26112,  25088,  28160,  27136,
     11008,  10496,  12032,  11520,   8960,   8448,   9984,   9472,
     15104,  14592,  16128,  15616,  13056,  12544,  14080,  13568,
       344,    328,    376,    360,    280,    264,    312,    296,
       472,    456,    504,    488,    408,    392,    440,    424,
        88,     72,    120,    104,     24,      8,     56,     40,
       216,    200,    248,    232,    152,    136,    184,    168,
      1376,   1312,   1504,   1440,   1120,   1056,   1248,   1184,
      1888,   1824,   2016,   1952,   1632,   1568,   1760,   1696,
       688,    656,    752,    720,    560,    528,    624,    592,
       944,    912,   1008,    976,    816,    784,    880,    848,
};

/* ---- scalar: the one-sample definitions of g711.h, looped ---------------- */

static void s16_to_ulaw_scalar(const void *src, void *dst, ptrdiff_t n)
{
    const unsigned char *s = src;
    uint8_t *d = dst;
    for (ptrdiff_t i = 0; i < n; i++)
        d[i] = ac_ulaw_from_s16(ac_load_s16le(s + 2 * i));
}

static void s16_to_alaw_scalar(const void *src, void *dst, ptrdiff_t n)
{
    const unsigned char *s = src;
    uint8_t *d = dst;
    for (ptrdiff_t i = 0; i < n; i++)
        d[i] = ac_alaw_from_s16(ac_load_s16le(s + 2 * i));
}

static inline float load_f32(const unsigned char *p)
{
    float x;
    memcpy(&x, p, 4);
    return x;
}

static void f32_to_ulaw_scalar(const void *src, void *dst, ptrdiff_t n)
{
    const unsigned char *s = src;
    uint8_t *d = dst;
    for (ptrdiff_t i = 0; i < n; i++)
        d[i] = ac_ulaw_from_s16(ac_pcm16_from_f32(load_f32(s + 4 * i)));
}

static void f32_to_alaw_scalar(const void *src, void *dst, ptrdiff_t n)
{
    const unsigned char *s = src;
    uint8_t *d = dst;
    for (ptrdiff_t i = 0; i < n; i++)
        d[i] = ac_alaw_from_s16(ac_pcm16_from_f32(load_f32(s + 4 * i)));
}

static inline void decode_s16(const int16_t *table, const void *src, void *dst, ptrdiff_t n)
{
    const uint8_t *s = src;
    unsigned char *d = dst;
    for (ptrdiff_t i = 0; i < n; i++)
        ac_store_s16le(d + 2 * i, table[s[i]]);
}

static inline void decode_f32(const int16_t *table, const void *src, void *dst, ptrdiff_t n)
{
    const uint8_t *s = src;
    unsigned char *d = dst;
    for (ptrdiff_t i = 0; i < n; i++) {
        float y = ac_f32_from_pcm16(table[s[i]]);
        memcpy(d + 4 * i, &y, 4);
    }
}

static void ulaw_to_s16_scalar(const void *src, void *dst, ptrdiff_t n)
{
    decode_s16(ac_ulaw_s16, src, dst, n);
}

static void alaw_to_s16_scalar(const void *src, void *dst, ptrdiff_t n)
{
    decode_s16(ac_alaw_s16, src, dst, n);
}

static void ulaw_to_f32_scalar(const void *src, void *dst, ptrdiff_t n)
{
    decode_f32(ac_ulaw_s16, src, dst, n);
}

static void alaw_to_f32_scalar(const void *src, void *dst, ptrdiff_t n)
{
    decode_f32(ac_alaw_s16, src, dst, n);
}

/* ---- x86-64 ---------------------------------------------------------------
 * Encoding without a vector count-leading-zeros (x86 has none before
 * AVX-512 CD): an int32 magnitude below 2^24 converts to float exactly, and
 * its bits are then the exponent (floor(log2)) and the bits after the
 * leading one.  Shifted right by 19 they read (127 + e) << 4 | next four
 * bits, which is the code's segment and mantissa up to a constant:
 *   μ-law, biased magnitude in [33, 8191], segment e - 5: (bits >> 19) - 0x840
 *   A-law, magnitude in [32, 4095], segment e - 4:        (bits >> 19) - 0x830
 * A-law's segment 0 ([0, 32), linear) is mag >> 1, chosen by a mask. */

#if AC_X86_64

#define ULAW 0
#define ALAW 1

static AC_ALWAYS_INLINE __m128i min_epi32_sse2(__m128i a, __m128i b)
{
    __m128i greater = _mm_cmpgt_epi32(a, b);
    return _mm_or_si128(_mm_and_si128(greater, b), _mm_andnot_si128(greater, a));
}

/* Codes (int32 lanes, 0-255) of four int32 samples in [-32768, 32767]. */
static AC_ALWAYS_INLINE __m128i encode_sse2(__m128i s, const int law)
{
    __m128i v = _mm_srai_epi32(s, law == ULAW ? 2 : 3);
    __m128i sign = _mm_srai_epi32(v, 31);
    __m128i flip = _mm_xor_si128(_mm_set1_epi32(law == ULAW ? 0xFF : 0xD5),
                                 _mm_and_si128(sign, _mm_set1_epi32(0x80)));
    if (law == ULAW) {
        __m128i mag = _mm_sub_epi32(_mm_xor_si128(v, sign), sign);
        mag = _mm_add_epi32(min_epi32_sse2(mag, _mm_set1_epi32(8158)), _mm_set1_epi32(33));
        __m128i bits = _mm_castps_si128(_mm_cvtepi32_ps(mag));
        __m128i code = _mm_sub_epi32(_mm_srli_epi32(bits, 19), _mm_set1_epi32(0x840));
        return _mm_xor_si128(code, flip);
    }
    __m128i mag = _mm_xor_si128(v, sign);
    __m128i bits = _mm_castps_si128(_mm_cvtepi32_ps(mag));
    __m128i big = _mm_sub_epi32(_mm_srli_epi32(bits, 19), _mm_set1_epi32(0x830));
    __m128i small = _mm_srli_epi32(mag, 1);
    __m128i linear = _mm_cmplt_epi32(mag, _mm_set1_epi32(32));
    __m128i code = _mm_or_si128(_mm_and_si128(linear, small), _mm_andnot_si128(linear, big));
    return _mm_xor_si128(code, flip);
}

/* Sixteen codes from four vectors of int32 codes, in order. */
static AC_ALWAYS_INLINE void store16_sse2(uint8_t *d, __m128i a, __m128i b, __m128i c, __m128i e)
{
    __m128i lo = _mm_packs_epi32(a, b), hi = _mm_packs_epi32(c, e);
    _mm_storeu_si128((__m128i *)d, _mm_packus_epi16(lo, hi));
}

static AC_ALWAYS_INLINE __m128i widen_lo_sse2(__m128i v)
{
    return _mm_srai_epi32(_mm_unpacklo_epi16(v, v), 16);
}

static AC_ALWAYS_INLINE __m128i widen_hi_sse2(__m128i v)
{
    return _mm_srai_epi32(_mm_unpackhi_epi16(v, v), 16);
}

static AC_ALWAYS_INLINE void s16_encode_sse2(const void *src, void *dst, ptrdiff_t n,
                                             const int law)
{
    const int16_t *s = src;
    uint8_t *d = dst;
    ptrdiff_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m128i a = _mm_loadu_si128((const __m128i *)(s + i));
        __m128i b = _mm_loadu_si128((const __m128i *)(s + i + 8));
        store16_sse2(d + i, encode_sse2(widen_lo_sse2(a), law), encode_sse2(widen_hi_sse2(a), law),
                     encode_sse2(widen_lo_sse2(b), law), encode_sse2(widen_hi_sse2(b), law));
    }
    (law == ULAW ? s16_to_ulaw_scalar : s16_to_alaw_scalar)(s + i, d + i, n - i);
}

static AC_ALWAYS_INLINE void f32_encode_sse2(const void *src, void *dst, ptrdiff_t n,
                                             const int law)
{
    const float *s = src;
    uint8_t *d = dst;
    ptrdiff_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m128i q[4];
        for (int k = 0; k < 4; k++)
            q[k] = encode_sse2(ac_sse2_pcm16_i32(_mm_loadu_ps(s + i + 4 * k)), law);
        store16_sse2(d + i, q[0], q[1], q[2], q[3]);
    }
    (law == ULAW ? f32_to_ulaw_scalar : f32_to_alaw_scalar)(s + i, d + i, n - i);
}

static void s16_to_ulaw_sse2(const void *src, void *dst, ptrdiff_t n)
{
    s16_encode_sse2(src, dst, n, ULAW);
}

static void s16_to_alaw_sse2(const void *src, void *dst, ptrdiff_t n)
{
    s16_encode_sse2(src, dst, n, ALAW);
}

static void f32_to_ulaw_sse2(const void *src, void *dst, ptrdiff_t n)
{
    f32_encode_sse2(src, dst, n, ULAW);
}

static void f32_to_alaw_sse2(const void *src, void *dst, ptrdiff_t n)
{
    f32_encode_sse2(src, dst, n, ALAW);
}

/* -- AVX2: the same arithmetic eight lanes wide; decoding 16 lanes wide. -- */

AC_TARGET_AVX2 static AC_ALWAYS_INLINE __m256i encode_avx2(__m256i s, const int law)
{
    __m256i v = _mm256_srai_epi32(s, law == ULAW ? 2 : 3);
    __m256i sign = _mm256_srai_epi32(v, 31);
    __m256i flip = _mm256_xor_si256(_mm256_set1_epi32(law == ULAW ? 0xFF : 0xD5),
                                    _mm256_and_si256(sign, _mm256_set1_epi32(0x80)));
    if (law == ULAW) {
        __m256i mag = _mm256_abs_epi32(v);
        mag = _mm256_add_epi32(_mm256_min_epi32(mag, _mm256_set1_epi32(8158)),
                               _mm256_set1_epi32(33));
        __m256i bits = _mm256_castps_si256(_mm256_cvtepi32_ps(mag));
        __m256i code = _mm256_sub_epi32(_mm256_srli_epi32(bits, 19), _mm256_set1_epi32(0x840));
        return _mm256_xor_si256(code, flip);
    }
    __m256i mag = _mm256_xor_si256(v, sign);
    __m256i bits = _mm256_castps_si256(_mm256_cvtepi32_ps(mag));
    __m256i big = _mm256_sub_epi32(_mm256_srli_epi32(bits, 19), _mm256_set1_epi32(0x830));
    __m256i small = _mm256_srli_epi32(mag, 1);
    __m256i linear = _mm256_cmpgt_epi32(_mm256_set1_epi32(32), mag);
    return _mm256_xor_si256(_mm256_blendv_epi8(big, small, linear), flip);
}

/* Sixteen codes from two vectors of int32 codes, in order. */
AC_TARGET_AVX2 static AC_ALWAYS_INLINE void store16_avx2(uint8_t *d, __m256i a, __m256i b)
{
    /* packs works per 128-bit lane; the permute restores sample order. */
    __m256i words = _mm256_permute4x64_epi64(_mm256_packs_epi32(a, b), 0xD8);
    __m128i bytes = _mm_packus_epi16(_mm256_castsi256_si128(words),
                                     _mm256_extracti128_si256(words, 1));
    _mm_storeu_si128((__m128i *)d, bytes);
}

AC_TARGET_AVX2 static AC_ALWAYS_INLINE void s16_encode_avx2(const void *src, void *dst,
                                                            ptrdiff_t n, const int law)
{
    const int16_t *s = src;
    uint8_t *d = dst;
    ptrdiff_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i a = _mm256_cvtepi16_epi32(_mm_loadu_si128((const __m128i *)(s + i)));
        __m256i b = _mm256_cvtepi16_epi32(_mm_loadu_si128((const __m128i *)(s + i + 8)));
        store16_avx2(d + i, encode_avx2(a, law), encode_avx2(b, law));
    }
    s16_encode_sse2(s + i, d + i, n - i, law);
}

AC_TARGET_AVX2 static AC_ALWAYS_INLINE void f32_encode_avx2(const void *src, void *dst,
                                                            ptrdiff_t n, const int law)
{
    const float *s = src;
    uint8_t *d = dst;
    ptrdiff_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i a = ac_avx2_pcm16_i32(_mm256_loadu_ps(s + i));
        __m256i b = ac_avx2_pcm16_i32(_mm256_loadu_ps(s + i + 8));
        store16_avx2(d + i, encode_avx2(a, law), encode_avx2(b, law));
    }
    f32_encode_sse2(s + i, d + i, n - i, law);
}

/* Sixteen decoded samples by G.711's expansion, in 16-bit lanes: the
 * segment's power of two comes from a byte shuffle (vpshufb) of an
 * eight-entry table and multiplies the step (AVX2 shifts 16-bit lanes by
 * one count only), at most 252 x 128 = 32256, inside int16.
 *   μ-law: u = ~code, ((((u & 0xF) << 3) + 0x84) << seg) - 0x84, negative
 *          where u has bit 7;
 *   A-law: a = code ^ 0x55, segment 0: ((a & 0xF) << 4) + 8, segment k:
 *          (((a & 0xF) << 4) + 0x108) << (k - 1), negative where a lacks
 *          bit 7.
 * The shuffle's index is the segment in the low byte and 0x80 in the high
 * one, which the shuffle turns into a zero byte. */
AC_TARGET_AVX2 static AC_ALWAYS_INLINE __m256i decode16_avx2(const uint8_t *codes, const int law)
{
    __m256i c = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)codes));
    __m256i x = _mm256_xor_si256(c, _mm256_set1_epi16(law == ULAW ? 0xFF : 0x55));
    __m256i mant = _mm256_and_si256(x, _mm256_set1_epi16(0x0F));
    __m256i seg = _mm256_and_si256(_mm256_srli_epi16(x, 4), _mm256_set1_epi16(7));
    __m256i index = _mm256_or_si256(seg, _mm256_set1_epi16((short)0x8000));
    __m256i powers = law == ULAW ? _mm256_setr_epi8(1, 2, 4, 8, 16, 32, 64, (char)128, 0, 0, 0, 0, 0,
                                                    0, 0, 0, 1, 2, 4, 8, 16, 32, 64, (char)128, 0,
                                                    0, 0, 0, 0, 0, 0, 0)
                                 : _mm256_setr_epi8(1, 1, 2, 4, 8, 16, 32, 64, 0, 0, 0, 0, 0, 0, 0,
                                                    0, 1, 1, 2, 4, 8, 16, 32, 64, 0, 0, 0, 0, 0, 0,
                                                    0, 0);
    __m256i power = _mm256_shuffle_epi8(powers, index);
    __m256i mag, negative;
    if (law == ULAW) {
        __m256i step = _mm256_add_epi16(_mm256_slli_epi16(mant, 3), _mm256_set1_epi16(0x84));
        mag = _mm256_sub_epi16(_mm256_mullo_epi16(step, power), _mm256_set1_epi16(0x84));
        negative = _mm256_cmpgt_epi16(x, _mm256_set1_epi16(0x7F));
    } else {
        __m256i above0 = _mm256_cmpgt_epi16(seg, _mm256_setzero_si256());
        __m256i step = _mm256_add_epi16(_mm256_slli_epi16(mant, 4), _mm256_set1_epi16(8));
        step = _mm256_add_epi16(step, _mm256_and_si256(above0, _mm256_set1_epi16(0x100)));
        mag = _mm256_mullo_epi16(step, power);
        negative = _mm256_cmpgt_epi16(_mm256_set1_epi16(0x80), x);
    }
    return _mm256_sub_epi16(_mm256_xor_si256(mag, negative), negative);
}

AC_TARGET_AVX2 static AC_ALWAYS_INLINE void decode_s16_avx2(const void *src, void *dst,
                                                            ptrdiff_t n, const int law)
{
    const uint8_t *s = src;
    int16_t *d = dst;
    ptrdiff_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(d + i), decode16_avx2(s + i, law));
    decode_s16(law == ULAW ? ac_ulaw_s16 : ac_alaw_s16, s + i, d + i, n - i);
}

AC_TARGET_AVX2 static AC_ALWAYS_INLINE void decode_f32_avx2(const void *src, void *dst,
                                                            ptrdiff_t n, const int law)
{
    const uint8_t *s = src;
    float *d = dst;
    const __m256 scale = _mm256_set1_ps(AC_PCM16_INV);
    ptrdiff_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i v = decode16_avx2(s + i, law);
        __m256i lo = _mm256_cvtepi16_epi32(_mm256_castsi256_si128(v));
        __m256i hi = _mm256_cvtepi16_epi32(_mm256_extracti128_si256(v, 1));
        _mm256_storeu_ps(d + i, _mm256_mul_ps(_mm256_cvtepi32_ps(lo), scale));
        _mm256_storeu_ps(d + i + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(hi), scale));
    }
    decode_f32(law == ULAW ? ac_ulaw_s16 : ac_alaw_s16, s + i, d + i, n - i);
}

AC_TARGET_AVX2 static void s16_to_ulaw_avx2(const void *src, void *dst, ptrdiff_t n)
{
    s16_encode_avx2(src, dst, n, ULAW);
}

AC_TARGET_AVX2 static void s16_to_alaw_avx2(const void *src, void *dst, ptrdiff_t n)
{
    s16_encode_avx2(src, dst, n, ALAW);
}

AC_TARGET_AVX2 static void f32_to_ulaw_avx2(const void *src, void *dst, ptrdiff_t n)
{
    f32_encode_avx2(src, dst, n, ULAW);
}

AC_TARGET_AVX2 static void f32_to_alaw_avx2(const void *src, void *dst, ptrdiff_t n)
{
    f32_encode_avx2(src, dst, n, ALAW);
}

AC_TARGET_AVX2 static void ulaw_to_s16_avx2(const void *src, void *dst, ptrdiff_t n)
{
    decode_s16_avx2(src, dst, n, ULAW);
}

AC_TARGET_AVX2 static void alaw_to_s16_avx2(const void *src, void *dst, ptrdiff_t n)
{
    decode_s16_avx2(src, dst, n, ALAW);
}

AC_TARGET_AVX2 static void ulaw_to_f32_avx2(const void *src, void *dst, ptrdiff_t n)
{
    decode_f32_avx2(src, dst, n, ULAW);
}

AC_TARGET_AVX2 static void alaw_to_f32_avx2(const void *src, void *dst, ptrdiff_t n)
{
    decode_f32_avx2(src, dst, n, ALAW);
}

#endif /* AC_X86_64 */

/* ---- aarch64: NEON has a count-leading-zeros and per-lane shifts --------- */

#if AC_AARCH64

/* Codes (int32 lanes) of four int32 samples in [-32768, 32767]. */
static AC_ALWAYS_INLINE int32x4_t encode_neon(int32x4_t s, const int law)
{
    if (law == 0) { /* μ-law */
        int32x4_t v = vshrq_n_s32(s, 2);
        int32x4_t sign = vshrq_n_s32(v, 31);
        int32x4_t mag = vaddq_s32(vminq_s32(vabsq_s32(v), vdupq_n_s32(8158)), vdupq_n_s32(33));
        int32x4_t seg = vsubq_s32(vdupq_n_s32(26), vclzq_s32(mag)); /* mag in [32 << seg, 64 << seg) */
        int32x4_t mant = vandq_s32(vshlq_s32(mag, vnegq_s32(vaddq_s32(seg, vdupq_n_s32(1)))),
                                   vdupq_n_s32(0xF));
        int32x4_t code = vorrq_s32(vshlq_n_s32(seg, 4), mant);
        int32x4_t flip = veorq_s32(vdupq_n_s32(0xFF), vandq_s32(sign, vdupq_n_s32(0x80)));
        return veorq_s32(code, flip);
    }
    int32x4_t v = vshrq_n_s32(s, 3);
    int32x4_t sign = vshrq_n_s32(v, 31);
    int32x4_t mag = veorq_s32(v, sign);
    int32x4_t seg = vmaxq_s32(vsubq_s32(vdupq_n_s32(27), vclzq_s32(mag)), vdupq_n_s32(0));
    int32x4_t shift = vmaxq_s32(seg, vdupq_n_s32(1));
    int32x4_t mant = vandq_s32(vshlq_s32(mag, vnegq_s32(shift)), vdupq_n_s32(0xF));
    int32x4_t code = vorrq_s32(vshlq_n_s32(seg, 4), mant);
    int32x4_t flip = veorq_s32(vdupq_n_s32(0xD5), vandq_s32(sign, vdupq_n_s32(0x80)));
    return veorq_s32(code, flip);
}

static AC_ALWAYS_INLINE uint8x8_t narrow8_neon(int32x4_t a, int32x4_t b)
{
    return vmovn_u16(vreinterpretq_u16_s16(vcombine_s16(vmovn_s32(a), vmovn_s32(b))));
}

static AC_ALWAYS_INLINE void s16_encode_neon(const void *src, void *dst, ptrdiff_t n,
                                             const int law)
{
    const uint8_t *s = src;
    uint8_t *d = dst;
    ptrdiff_t i = 0;
    for (; i + 8 <= n; i += 8) {
        int16x8_t v = vreinterpretq_s16_u8(vld1q_u8(s + 2 * i));
        int32x4_t lo = encode_neon(vmovl_s16(vget_low_s16(v)), law);
        int32x4_t hi = encode_neon(vmovl_high_s16(v), law);
        vst1_u8(d + i, narrow8_neon(lo, hi));
    }
    (law == 0 ? s16_to_ulaw_scalar : s16_to_alaw_scalar)(s + 2 * i, d + i, n - i);
}

static AC_ALWAYS_INLINE void f32_encode_neon(const void *src, void *dst, ptrdiff_t n,
                                             const int law)
{
    const uint8_t *s = src;
    uint8_t *d = dst;
    ptrdiff_t i = 0;
    for (; i + 8 <= n; i += 8) {
        int32x4_t lo = ac_neon_pcm16_i32(vreinterpretq_f32_u8(vld1q_u8(s + 4 * i)));
        int32x4_t hi = ac_neon_pcm16_i32(vreinterpretq_f32_u8(vld1q_u8(s + 4 * i + 16)));
        vst1_u8(d + i, narrow8_neon(encode_neon(lo, law), encode_neon(hi, law)));
    }
    (law == 0 ? f32_to_ulaw_scalar : f32_to_alaw_scalar)(s + 4 * i, d + i, n - i);
}

/* Eight decoded samples, by G.711's arithmetic with per-lane shifts (the
 * formulas that made the tables). */
static AC_ALWAYS_INLINE int16x8_t decode_neon(uint8x8_t codes, const int law)
{
    if (law == 0) {
        int16x8_t u = vreinterpretq_s16_u16(vmovl_u8(vmvn_u8(codes)));
        int16x8_t seg = vandq_s16(vshrq_n_s16(u, 4), vdupq_n_s16(7));
        int16x8_t base = vaddq_s16(vshlq_n_s16(vandq_s16(u, vdupq_n_s16(0xF)), 3),
                                   vdupq_n_s16(0x84));
        int16x8_t mag = vsubq_s16(vshlq_s16(base, seg), vdupq_n_s16(0x84));
        int16x8_t negative = vnegq_s16(vshrq_n_s16(u, 7)); /* -1 where bit 7 */
        return vsubq_s16(veorq_s16(mag, negative), negative);
    }
    int16x8_t a = vreinterpretq_s16_u16(vmovl_u8(veor_u8(codes, vdup_n_u8(0x55))));
    int16x8_t seg = vandq_s16(vshrq_n_s16(a, 4), vdupq_n_s16(7));
    int16x8_t t = vshlq_n_s16(vandq_s16(a, vdupq_n_s16(0xF)), 4);
    /* segment 0: t + 8; segment k: (t + 0x108) << (k - 1) */
    int16x8_t step = vandq_s16(vreinterpretq_s16_u16(vcgtq_s16(seg, vdupq_n_s16(0))),
                               vdupq_n_s16(0x100));
    t = vaddq_s16(t, vaddq_s16(vdupq_n_s16(8), step));
    int16x8_t mag = vshlq_s16(t, vmaxq_s16(vsubq_s16(seg, vdupq_n_s16(1)), vdupq_n_s16(0)));
    int16x8_t positive = vnegq_s16(vshrq_n_s16(a, 7)); /* -1 where bit 7 */
    /* bit 7 set: +mag; clear: -mag */
    return vsubq_s16(veorq_s16(vnegq_s16(mag), positive), positive);
}

static AC_ALWAYS_INLINE void decode_s16_neon(const void *src, void *dst, ptrdiff_t n,
                                             const int law)
{
    const uint8_t *s = src;
    uint8_t *d = dst;
    ptrdiff_t i = 0;
    for (; i + 8 <= n; i += 8)
        vst1q_u8(d + 2 * i, vreinterpretq_u8_s16(decode_neon(vld1_u8(s + i), law)));
    decode_s16(law == 0 ? ac_ulaw_s16 : ac_alaw_s16, s + i, d + 2 * i, n - i);
}

static AC_ALWAYS_INLINE void decode_f32_neon(const void *src, void *dst, ptrdiff_t n,
                                             const int law)
{
    const uint8_t *s = src;
    uint8_t *d = dst;
    const float32x4_t scale = vdupq_n_f32(AC_PCM16_INV);
    ptrdiff_t i = 0;
    for (; i + 8 <= n; i += 8) {
        int16x8_t v = decode_neon(vld1_u8(s + i), law);
        float32x4_t lo = vmulq_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(v))), scale);
        float32x4_t hi = vmulq_f32(vcvtq_f32_s32(vmovl_high_s16(v)), scale);
        vst1q_u8(d + 4 * i, vreinterpretq_u8_f32(lo));
        vst1q_u8(d + 4 * i + 16, vreinterpretq_u8_f32(hi));
    }
    decode_f32(law == 0 ? ac_ulaw_s16 : ac_alaw_s16, s + i, d + 4 * i, n - i);
}

static void s16_to_ulaw_neon(const void *src, void *dst, ptrdiff_t n)
{
    s16_encode_neon(src, dst, n, 0);
}

static void s16_to_alaw_neon(const void *src, void *dst, ptrdiff_t n)
{
    s16_encode_neon(src, dst, n, 1);
}

static void f32_to_ulaw_neon(const void *src, void *dst, ptrdiff_t n)
{
    f32_encode_neon(src, dst, n, 0);
}

static void f32_to_alaw_neon(const void *src, void *dst, ptrdiff_t n)
{
    f32_encode_neon(src, dst, n, 1);
}

static void ulaw_to_s16_neon(const void *src, void *dst, ptrdiff_t n)
{
    decode_s16_neon(src, dst, n, 0);
}

static void alaw_to_s16_neon(const void *src, void *dst, ptrdiff_t n)
{
    decode_s16_neon(src, dst, n, 1);
}

static void ulaw_to_f32_neon(const void *src, void *dst, ptrdiff_t n)
{
    decode_f32_neon(src, dst, n, 0);
}

static void alaw_to_f32_neon(const void *src, void *dst, ptrdiff_t n)
{
    decode_f32_neon(src, dst, n, 1);
}

#endif /* AC_AARCH64 */

/* ---- dispatch --------------------------------------------------------------
 * Indexed by path, then op; a path without code here stays NULL and runs
 * the scalar kernels.  SSE2 decodes with the scalar table loop: it has no
 * byte shuffle (pshufb is SSSE3) for the powers of two.  AVX-512 runs the
 * AVX2 kernels: a wider version could not be tested on the machines this
 * was written on, and a 20 ms frame is 160 samples. */

static const ac_g711_fn kernels[AC_PATH_COUNT][AC_G711_OPS] = {
    [AC_PATH_SCALAR] = {s16_to_ulaw_scalar, s16_to_alaw_scalar, f32_to_ulaw_scalar,
                        f32_to_alaw_scalar, ulaw_to_s16_scalar, alaw_to_s16_scalar,
                        ulaw_to_f32_scalar, alaw_to_f32_scalar},
#if AC_X86_64
    [AC_PATH_SSE2] = {s16_to_ulaw_sse2, s16_to_alaw_sse2, f32_to_ulaw_sse2, f32_to_alaw_sse2,
                      ulaw_to_s16_scalar, alaw_to_s16_scalar, ulaw_to_f32_scalar,
                      alaw_to_f32_scalar},
    [AC_PATH_AVX2] = {s16_to_ulaw_avx2, s16_to_alaw_avx2, f32_to_ulaw_avx2, f32_to_alaw_avx2,
                      ulaw_to_s16_avx2, alaw_to_s16_avx2, ulaw_to_f32_avx2, alaw_to_f32_avx2},
    [AC_PATH_AVX512] = {s16_to_ulaw_avx2, s16_to_alaw_avx2, f32_to_ulaw_avx2, f32_to_alaw_avx2,
                        ulaw_to_s16_avx2, alaw_to_s16_avx2, ulaw_to_f32_avx2, alaw_to_f32_avx2},
#endif
#if AC_AARCH64
    [AC_PATH_NEON] = {s16_to_ulaw_neon, s16_to_alaw_neon, f32_to_ulaw_neon, f32_to_alaw_neon,
                      ulaw_to_s16_neon, alaw_to_s16_neon, ulaw_to_f32_neon, alaw_to_f32_neon},
#endif
};

ac_g711_fn ac_g711_kernel(int path, int op)
{
    if (op < 0 || op >= AC_G711_OPS)
        return NULL;
    if (path < 0 || path >= AC_PATH_COUNT || kernels[path][op] == NULL ||
        !ac_path_supported(path))
        path = AC_PATH_SCALAR;
    return kernels[path][op];
}
