#include "simd.h"

#include <stdlib.h>
#include <string.h>

#if AC_X86_64 && defined(_MSC_VER)
#include <immintrin.h>
#include <intrin.h>
#endif

static const char *const path_names[AC_PATH_COUNT] = {"scalar", "sse2", "avx2", "avx512", "neon"};

/* Vector width of each path as a rank (0 scalar, then 128, 256 and 512
 * bits): what AUDIOCORE_SIMD caps.  SSE2 and NEON are both 128 bits and
 * never on one CPU. */
static const int path_width[AC_PATH_COUNT] = {0, 1, 2, 3, 1};

const char *ac_path_name(int path)
{
    return (path >= 0 && path < AC_PATH_COUNT) ? path_names[path] : NULL;
}

#if AC_X86_64 && defined(_MSC_VER)
/* MSVC has no __builtin_cpu_supports: read CPUID, and XCR0 to be sure the
 * OS saves the wide registers. */
static int msvc_supports(int path)
{
    int r[4];
    __cpuid(r, 1);
    int osxsave = (r[2] >> 27) & 1, fma = (r[2] >> 12) & 1;
    if (!osxsave)
        return 0;
    unsigned long long xcr0 = _xgetbv(0);
    __cpuidex(r, 7, 0);
    int avx2 = (r[1] >> 5) & 1, avx512f = (r[1] >> 16) & 1, avx512bw = (r[1] >> 30) & 1;
    int avx512vl = (r[1] >> 31) & 1;
    if (path == AC_PATH_AVX2)
        return avx2 && fma && (xcr0 & 0x6) == 0x6;
    return avx512f && avx512bw && avx512vl && (xcr0 & 0xE6) == 0xE6;
}
#endif

int ac_path_supported(int path)
{
    if (AC_PCM16_SWAP && path != AC_PATH_SCALAR)
        return 0;
    switch (path) {
    case AC_PATH_SCALAR:
        return 1;
#if AC_X86_64
    case AC_PATH_SSE2:
        return 1;
#if defined(_MSC_VER)
    case AC_PATH_AVX2:
    case AC_PATH_AVX512:
        return msvc_supports(path);
#else
    case AC_PATH_AVX2:
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case AC_PATH_AVX512:
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx2") &&
               __builtin_cpu_supports("fma");
#endif
#endif
#if AC_AARCH64
    case AC_PATH_NEON:
        /* Advanced SIMD is part of every AArch64 ABI we build for (Linux,
         * macOS, Windows): no run-time check. */
        return 1;
#endif
    default:
        return 0;
    }
}

int ac_best_path(void)
{
    int cap = path_width[AC_PATH_AVX512]; /* the widest: no cap */
    const char *env = getenv("AUDIOCORE_SIMD");
    if (env != NULL && env[0] != '\0') {
        for (int p = 0; p < AC_PATH_COUNT; p++)
            if (strcmp(env, path_names[p]) == 0)
                cap = path_width[p];
    }
    int best = AC_PATH_SCALAR;
    for (int p = 1; p < AC_PATH_COUNT; p++)
        if (path_width[p] <= cap && path_width[p] > path_width[best] && ac_path_supported(p))
            best = p;
    return best;
}
