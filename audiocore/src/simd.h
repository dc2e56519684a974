/* Instruction-set paths shared by every kernel module.
 *
 * A module compiles each path it has into the same object file, marking the
 * wider ones with AC_TARGET so the wheel never needs -march flags, and picks
 * one at run time with ac_best_path().  Within an architecture a wider path
 * needs every feature of a narrower one. */
#ifndef AUDIOCORE_SIMD_H
#define AUDIOCORE_SIMD_H

#include <stddef.h>
#include <stdint.h>

enum ac_path {
    AC_PATH_SCALAR = 0, /* portable C, any CPU */
    AC_PATH_SSE2 = 1,   /* x86-64 baseline */
    AC_PATH_AVX2 = 2,   /* AVX2 + FMA */
    AC_PATH_AVX512 = 3, /* AVX-512 F + BW */
    AC_PATH_NEON = 4,   /* aarch64 baseline (Advanced SIMD) */
    AC_PATH_COUNT = 5
};

#if defined(__x86_64__) || defined(_M_X64)
#define AC_X86_64 1
#else
#define AC_X86_64 0
#endif

#if defined(__aarch64__) || defined(_M_ARM64)
#define AC_AARCH64 1
#else
#define AC_AARCH64 0
#endif

/* PCM16 is little-endian on the wire (docs/audio.md): a big-endian host swaps
 * its bytes where a kernel reads or writes it (pcm.h).  Every MSVC target is
 * little-endian.  A build may force AC_PCM16_SWAP=1 on a little-endian host:
 * the tests do, to run the swapping code here (tests/core/test_byte_order.py). */
#ifndef AC_PCM16_SWAP
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define AC_PCM16_SWAP 1
#else
#define AC_PCM16_SWAP 0
#endif
#endif

#if defined(__GNUC__) || defined(__clang__)
#define AC_TARGET(isa) __attribute__((target(isa)))
#else
/* MSVC compiles any intrinsic without a flag. */
#define AC_TARGET(isa)
#endif

#define AC_TARGET_AVX2 AC_TARGET("avx2,fma")
#define AC_TARGET_AVX512 AC_TARGET("avx512f,avx512bw,avx512vl,avx2,fma")

/* Nonzero when this CPU (and OS) can run `path`.  The vector paths load and
 * store PCM16 as little-endian lanes, so a swapping build has none. */
int ac_path_supported(int path);

/* The widest supported path, capped by the AUDIOCORE_SIMD environment
 * variable ("scalar", "sse2", "avx2", "avx512", "neon") when it is set.  The
 * cap is a vector width, so a value means the same on every CPU: "neon" on
 * x86-64 picks SSE2, "avx2" on aarch64 picks NEON. */
int ac_best_path(void);

/* "scalar", "sse2", "avx2", "avx512", "neon"; NULL for anything else. */
const char *ac_path_name(int path);

#endif
