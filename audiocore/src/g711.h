/* G.711 μ-law and A-law (ITU-T G.711), bit-exact with CPython's audioop
 * (lin2ulaw, ulaw2lin, lin2alaw, alaw2lin on 16-bit samples): the de facto
 * reference of telephony code in Python (docs/audio.md: G.711).
 *
 * A code is one byte.  Encoding reads PCM16 (little-endian, like every
 * kernel) or float32, which goes through the PCM policy (pcm.h) to PCM16
 * first; decoding writes PCM16, or float32 as PCM16 / 32768.  So float32 is
 * exactly the composition of the PCM16 codec and the PCM conversions.
 *
 * Pointers need no alignment, as in convert.h. */
#ifndef AUDIOCORE_G711_H
#define AUDIOCORE_G711_H

#include <stddef.h>
#include <stdint.h>

#include "pcm.h"

/* Decoded value of every code, as audioop's ulaw2lin and alaw2lin give it. */
extern const int16_t ac_ulaw_s16[256];
extern const int16_t ac_alaw_s16[256];

/* One sample, the definition every path matches.  μ-law works on the top 14
 * bits, A-law on the top 13 (as G.711 and audioop); the arithmetic shift of
 * a negative sample rounds towards minus infinity, as audioop's does. */
static inline uint8_t ac_ulaw_from_s16(int16_t s)
{
    int v = s >> 2;
    int mask = v < 0 ? 0x7F : 0xFF; /* sign bit, and every bit inverted */
    int mag = v < 0 ? -v : v;
    /* The bias of 33 moves segment edges to powers of two; 8191 is the top
     * of segment 7 (audioop clips at 8159 and maps anything above the top
     * to the top code). */
    mag = (mag > 8158 ? 8158 : mag) + 33;
    int seg = 0;
    while (mag >> (seg + 6)) /* mag in [32 << seg, 64 << seg) */
        seg++;
    return (uint8_t)(((seg << 4) | ((mag >> (seg + 1)) & 0xF)) ^ mask);
}

static inline uint8_t ac_alaw_from_s16(int16_t s)
{
    int v = s >> 3;
    int mask = v < 0 ? 0x55 : 0xD5; /* sign bit, and even bits inverted */
    int mag = v < 0 ? -v - 1 : v;   /* one's complement magnitude, [0, 4095] */
    int seg = 0;
    while (mag >> (seg + 5)) /* segment 0 is [0, 32); k is [16 << k, 32 << k) */
        seg++;
    return (uint8_t)(((seg << 4) | ((mag >> (seg ? seg : 1)) & 0xF)) ^ mask);
}

/* The kernels, one signature: `n` samples from `src` to `dst`. */
typedef void (*ac_g711_fn)(const void *src, void *dst, ptrdiff_t n);

enum ac_g711_op {
    AC_S16_TO_ULAW,
    AC_S16_TO_ALAW,
    AC_F32_TO_ULAW,
    AC_F32_TO_ALAW,
    AC_ULAW_TO_S16,
    AC_ALAW_TO_S16,
    AC_ULAW_TO_F32,
    AC_ALAW_TO_F32,
    AC_G711_OPS
};

/* The kernel of `op` on `path`, the scalar one where this build has none
 * for the path or this CPU cannot run it; NULL for an op out of range.
 * Callers keep the path (and the kernels) they use: the conversion module
 * one for all its functions, each resampler its own. */
ac_g711_fn ac_g711_kernel(int path, int op);

#endif
