/* Instructions executed by one 20 ms chunk of work on one SIMD path: speed
 * under emulation means nothing, the instruction count of the generated
 * code does (benchmarks/aarch64_insns.sh counts them under qemu and
 * benchmarks/README.md records them).
 *
 *   aarch64_insns KIND PATH
 *   KIND: f32-s16 | s16-f32 (960 samples) | resample (48 kHz -> 16 kHz,
 *         mono, f32 in, s16 out, one 960-frame chunk after a first one)
 *   PATH: scalar | neon | sse2 | ...
 *
 * The counted region lies between the calls to mark_begin() and
 * mark_end(); inputs are made before it and the result is checked after it
 * against the scalar path (bit-identical for conversion, within one LSB for
 * the resampler, as tests/core asserts). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert.h"
#include "resample.h"
#include "simd.h"

#define CHUNK 960
/* "voice" at 48 kHz -> 16 kHz: one phase of 112 taps, 16 frames of delay
 * (audiocore._filters.design(1, 3, "voice")).  The count depends on the
 * shape, not the values, so a smooth stand-in table does. */
#define UP 1
#define DOWN 3
#define TAPS 112
#define DELAY 16

__attribute__((noinline)) void mark_begin(void)
{
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void mark_end(void)
{
    __asm__ volatile("" ::: "memory");
}

static int path_named(const char *name)
{
    for (int p = 0; p < AC_PATH_COUNT; p++)
        if (strcmp(ac_path_name(p), name) == 0 && ac_path_supported(p))
            return p;
    fprintf(stderr, "no path %s here\n", name);
    exit(2);
}

static float samples[2 * CHUNK];
static int16_t pcm[CHUNK];
static float coefs[TAPS];

/* One resampled chunk (the second of two: the history is full) on `path`. */
static int64_t resample(int path, int16_t *out, int counted)
{
    static int16_t first[CHUNK];
    ac_resampler *r = ac_resampler_new(coefs, UP, DOWN, TAPS, DELAY, 1, AC_FORMAT_F32,
                                       AC_FORMAT_S16, path);
    if (r == NULL || ac_resampler_path(r) != path)
        exit(2);
    ac_resampler_process(r, samples, CHUNK, first);
    if (counted)
        mark_begin();
    int64_t n = ac_resampler_process(r, samples + CHUNK, CHUNK, out);
    if (counted)
        mark_end();
    ac_resampler_free(r);
    return n;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s f32-s16|s16-f32|resample PATH\n", argv[0]);
        return 2;
    }
    const char *kind = argv[1];
    int path = path_named(argv[2]);
    /* Past full scale both ways (clipping), NaN, and everything between. */
    for (int i = 0; i < 2 * CHUNK; i++)
        samples[i] = -1.25f + 2.5f * (float)i / (2 * CHUNK);
    samples[7] = 0.0f / 0.0f;
    for (int i = 0; i < CHUNK; i++)
        pcm[i] = (int16_t)(i * 68 - 32768);
    for (int k = 0; k < TAPS; k++)
        coefs[k] = (float)(k + 1) / (TAPS * TAPS / 2);

    static int16_t s16[CHUNK], s16_ref[CHUNK];
    static float f32[CHUNK], f32_ref[CHUNK];
    int ok;
    if (strcmp(kind, "resample") == 0) {
        int64_t n = resample(path, s16, 1), n_ref = resample(AC_PATH_SCALAR, s16_ref, 0);
        ok = n == n_ref && n == CHUNK / DOWN;
        for (int64_t i = 0; ok && i < n; i++)
            ok = abs(s16[i] - s16_ref[i]) <= 1;
    } else if (strcmp(kind, "f32-s16") == 0 || strcmp(kind, "s16-f32") == 0) {
        int to_s16 = kind[0] == 'f';
        ac_convert_set_path(path);
        mark_begin();
        if (to_s16)
            ac_f32_to_s16(samples, s16, CHUNK);
        else
            ac_s16_to_f32(pcm, f32, CHUNK);
        mark_end();
        ac_convert_set_path(AC_PATH_SCALAR);
        ac_f32_to_s16(samples, s16_ref, CHUNK);
        ac_s16_to_f32(pcm, f32_ref, CHUNK);
        ok = to_s16 ? memcmp(s16, s16_ref, sizeof s16) == 0 : memcmp(f32, f32_ref, sizeof f32) == 0;
    } else {
        fprintf(stderr, "unknown kind %s\n", kind);
        return 2;
    }
    if (!ok) {
        fprintf(stderr, "%s on %s differs from the scalar path\n", kind, argv[2]);
        return 1;
    }
    return 0;
}
