/* The echo canceller's inner loops: every filter partition's output
 * (y += w x) and update (w += g conj(x)), over split complex spectra, on
 * the SIMD path chosen at creation (simd.c).  The paths differ only in
 * rounding (FMA). */
#include <string.h>

#include "aec_state.h"
#include "simd.h"

#if AC_X86_64
#include <immintrin.h>
#endif
#if AC_AARCH64
#include <arm_neon.h>
#endif

/* ---- complex multiply-accumulate over split spectra ---------------------
 * The filter's inner loops: every partition's output (y += w x) and update
 * (w += g conj(x)).  n is a multiple of 16. */

static void mac_scalar(float *yr, float *yi, const float *ar, const float *ai, const float *br,
                       const float *bi, int n)
{
    for (int i = 0; i < n; i++) {
        yr[i] += ar[i] * br[i] - ai[i] * bi[i];
        yi[i] += ar[i] * bi[i] + ai[i] * br[i];
    }
}

static void mac_conj_scalar(float *yr, float *yi, const float *ar, const float *ai,
                            const float *br, const float *bi, int n)
{
    for (int i = 0; i < n; i++) {
        yr[i] += ar[i] * br[i] + ai[i] * bi[i];
        yi[i] += ai[i] * br[i] - ar[i] * bi[i];
    }
}

#if AC_X86_64
static void mac_sse2(float *yr, float *yi, const float *ar, const float *ai, const float *br,
                     const float *bi, int n)
{
    for (int i = 0; i < n; i += 4) {
        __m128 a_r = _mm_loadu_ps(ar + i), a_i = _mm_loadu_ps(ai + i);
        __m128 b_r = _mm_loadu_ps(br + i), b_i = _mm_loadu_ps(bi + i);
        __m128 re = _mm_sub_ps(_mm_mul_ps(a_r, b_r), _mm_mul_ps(a_i, b_i));
        __m128 im = _mm_add_ps(_mm_mul_ps(a_r, b_i), _mm_mul_ps(a_i, b_r));
        _mm_storeu_ps(yr + i, _mm_add_ps(_mm_loadu_ps(yr + i), re));
        _mm_storeu_ps(yi + i, _mm_add_ps(_mm_loadu_ps(yi + i), im));
    }
}

static void mac_conj_sse2(float *yr, float *yi, const float *ar, const float *ai, const float *br,
                          const float *bi, int n)
{
    for (int i = 0; i < n; i += 4) {
        __m128 a_r = _mm_loadu_ps(ar + i), a_i = _mm_loadu_ps(ai + i);
        __m128 b_r = _mm_loadu_ps(br + i), b_i = _mm_loadu_ps(bi + i);
        __m128 re = _mm_add_ps(_mm_mul_ps(a_r, b_r), _mm_mul_ps(a_i, b_i));
        __m128 im = _mm_sub_ps(_mm_mul_ps(a_i, b_r), _mm_mul_ps(a_r, b_i));
        _mm_storeu_ps(yr + i, _mm_add_ps(_mm_loadu_ps(yr + i), re));
        _mm_storeu_ps(yi + i, _mm_add_ps(_mm_loadu_ps(yi + i), im));
    }
}

AC_TARGET_AVX2 static void mac_avx2(float *yr, float *yi, const float *ar, const float *ai,
                                    const float *br, const float *bi, int n)
{
    for (int i = 0; i < n; i += 8) {
        __m256 a_r = _mm256_loadu_ps(ar + i), a_i = _mm256_loadu_ps(ai + i);
        __m256 b_r = _mm256_loadu_ps(br + i), b_i = _mm256_loadu_ps(bi + i);
        __m256 re = _mm256_fmadd_ps(a_r, b_r, _mm256_loadu_ps(yr + i));
        __m256 im = _mm256_fmadd_ps(a_r, b_i, _mm256_loadu_ps(yi + i));
        _mm256_storeu_ps(yr + i, _mm256_fnmadd_ps(a_i, b_i, re));
        _mm256_storeu_ps(yi + i, _mm256_fmadd_ps(a_i, b_r, im));
    }
}

AC_TARGET_AVX2 static void mac_conj_avx2(float *yr, float *yi, const float *ar, const float *ai,
                                         const float *br, const float *bi, int n)
{
    for (int i = 0; i < n; i += 8) {
        __m256 a_r = _mm256_loadu_ps(ar + i), a_i = _mm256_loadu_ps(ai + i);
        __m256 b_r = _mm256_loadu_ps(br + i), b_i = _mm256_loadu_ps(bi + i);
        __m256 re = _mm256_fmadd_ps(a_r, b_r, _mm256_loadu_ps(yr + i));
        __m256 im = _mm256_fmadd_ps(a_i, b_r, _mm256_loadu_ps(yi + i));
        _mm256_storeu_ps(yr + i, _mm256_fmadd_ps(a_i, b_i, re));
        _mm256_storeu_ps(yi + i, _mm256_fnmadd_ps(a_r, b_i, im));
    }
}

AC_TARGET_AVX512 static void mac_avx512(float *yr, float *yi, const float *ar, const float *ai,
                                        const float *br, const float *bi, int n)
{
    for (int i = 0; i < n; i += 16) {
        __m512 a_r = _mm512_loadu_ps(ar + i), a_i = _mm512_loadu_ps(ai + i);
        __m512 b_r = _mm512_loadu_ps(br + i), b_i = _mm512_loadu_ps(bi + i);
        __m512 re = _mm512_fmadd_ps(a_r, b_r, _mm512_loadu_ps(yr + i));
        __m512 im = _mm512_fmadd_ps(a_r, b_i, _mm512_loadu_ps(yi + i));
        _mm512_storeu_ps(yr + i, _mm512_fnmadd_ps(a_i, b_i, re));
        _mm512_storeu_ps(yi + i, _mm512_fmadd_ps(a_i, b_r, im));
    }
}

AC_TARGET_AVX512 static void mac_conj_avx512(float *yr, float *yi, const float *ar,
                                             const float *ai, const float *br, const float *bi,
                                             int n)
{
    for (int i = 0; i < n; i += 16) {
        __m512 a_r = _mm512_loadu_ps(ar + i), a_i = _mm512_loadu_ps(ai + i);
        __m512 b_r = _mm512_loadu_ps(br + i), b_i = _mm512_loadu_ps(bi + i);
        __m512 re = _mm512_fmadd_ps(a_r, b_r, _mm512_loadu_ps(yr + i));
        __m512 im = _mm512_fmadd_ps(a_i, b_r, _mm512_loadu_ps(yi + i));
        _mm512_storeu_ps(yr + i, _mm512_fmadd_ps(a_i, b_i, re));
        _mm512_storeu_ps(yi + i, _mm512_fnmadd_ps(a_r, b_i, im));
    }
}
#endif /* AC_X86_64 */

#if AC_AARCH64
static void mac_neon(float *yr, float *yi, const float *ar, const float *ai, const float *br,
                     const float *bi, int n)
{
    for (int i = 0; i < n; i += 4) {
        float32x4_t a_r = vld1q_f32(ar + i), a_i = vld1q_f32(ai + i);
        float32x4_t b_r = vld1q_f32(br + i), b_i = vld1q_f32(bi + i);
        float32x4_t re = vfmaq_f32(vld1q_f32(yr + i), a_r, b_r);
        float32x4_t im = vfmaq_f32(vld1q_f32(yi + i), a_r, b_i);
        vst1q_f32(yr + i, vfmsq_f32(re, a_i, b_i));
        vst1q_f32(yi + i, vfmaq_f32(im, a_i, b_r));
    }
}

static void mac_conj_neon(float *yr, float *yi, const float *ar, const float *ai, const float *br,
                          const float *bi, int n)
{
    for (int i = 0; i < n; i += 4) {
        float32x4_t a_r = vld1q_f32(ar + i), a_i = vld1q_f32(ai + i);
        float32x4_t b_r = vld1q_f32(br + i), b_i = vld1q_f32(bi + i);
        float32x4_t re = vfmaq_f32(vld1q_f32(yr + i), a_r, b_r);
        float32x4_t im = vfmaq_f32(vld1q_f32(yi + i), a_i, b_r);
        vst1q_f32(yr + i, vfmaq_f32(re, a_i, b_i));
        vst1q_f32(yi + i, vfmsq_f32(im, a_r, b_i));
    }
}
#endif /* AC_AARCH64 */

void ac_aec_pick_kernels(ac_aec *a)
{
    a->mac = mac_scalar;
    a->mac_conj = mac_conj_scalar;
#if AC_X86_64
    if (a->path == AC_PATH_SSE2) {
        a->mac = mac_sse2;
        a->mac_conj = mac_conj_sse2;
    } else if (a->path == AC_PATH_AVX2) {
        a->mac = mac_avx2;
        a->mac_conj = mac_conj_avx2;
    } else if (a->path == AC_PATH_AVX512) {
        a->mac = mac_avx512;
        a->mac_conj = mac_conj_avx512;
    }
#endif
#if AC_AARCH64
    if (a->path == AC_PATH_NEON) {
        a->mac = mac_neon;
        a->mac_conj = mac_conj_neon;
    }
#endif
}

/* y = sum over partitions of W_p X(lag offset + p). */
void ac_aec_filter_output(ac_aec *a, const float *wr, const float *wi, float *yr, float *yi)
{
    ac_aec_filter_output_back(a, wr, wi, yr, yi, 0);
}

void ac_aec_filter_output_back(ac_aec *a, const float *wr, const float *wi, float *yr, float *yi,
                               int back)
{
    const size_t S = (size_t)a->stride;
    memset(yr, 0, sizeof(float) * S);
    memset(yi, 0, sizeof(float) * S);
    for (int p = 0; p < a->partitions; p++) {
        int s = slot_of(a, a->offset + p + back);
        a->mac(yr, yi, wr + p * S, wi + p * S, a->xr + s * S, a->xi + s * S, (int)S);
    }
}

/* W_p += G conj(X(lag offset + p)). */
void ac_aec_filter_update(ac_aec *a, float *wr, float *wi, const float *gr, const float *gi)
{
    const size_t S = (size_t)a->stride;
    for (int p = 0; p < a->partitions; p++) {
        int s = slot_of(a, a->offset + p);
        a->mac_conj(wr + p * S, wi + p * S, gr, gi, a->xr + s * S, a->xi + s * S, (int)S);
    }
}

