/* Streaming polyphase FIR resampler (docs/audio.md).
 *
 * The filter is designed in Python (audiocore/_filters.py) and handed over
 * as a phase table; this file only runs it.  Output n sits at input time
 * n * down / up (aligned, like scipy's resample_poly) and needs input up to
 * frame floor((n + delay) * down / up), so it is emitted by the first call
 * after which that frame has arrived.  Every output is a dot product of one
 * table row with a window of input that depends only on n, so the result is
 * the same however the input is split into calls (on a given SIMD path). */
#ifndef AUDIOCORE_RESAMPLE_H
#define AUDIOCORE_RESAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "pcm.h" /* enum ac_sample_format, AC_MAX_CHANNELS */

/* Row lengths are a multiple of this, so vector loops need no remainder. */
#define AC_RESAMPLE_TAP_ALIGN 16

typedef struct ac_resampler ac_resampler;

/* `coefs` holds `up` rows of `taps` floats: row p is phase p of the
 * prototype (h[p], h[p + up], ...) reversed and zero-padded at the front,
 * so row p dotted with the `taps` newest input frames gives one output.
 * The table is borrowed and must outlive the resampler.  `delay` is the
 * look-ahead in output frames (the prototype's centre is delay * down).
 * `channels` is 1 to AC_MAX_CHANNELS.  Returns NULL when out of memory or
 * when the arguments are inconsistent. */
ac_resampler *ac_resampler_new(const float *coefs, int up, int down, int taps, int delay,
                               int channels, int in_format, int out_format, int path);
void ac_resampler_free(ac_resampler *r);

/* Back to the state of a new stream (history of zeros, counters at 0). */
void ac_resampler_reset(ac_resampler *r);

/* Frames that ac_resampler_process() will write for `in_frames` more input. */
int64_t ac_resampler_process_frames(const ac_resampler *r, int64_t in_frames);

/* Consumes `in_frames` interleaved frames, writes every output frame they
 * determine to `out` (interleaved) and returns how many it wrote. */
int64_t ac_resampler_process(ac_resampler *r, const void *in, int64_t in_frames, void *out);

/* Frames that ac_resampler_flush() will write: the stream's total
 * round_half_up(frames_in * up / down) less what was already written. */
int64_t ac_resampler_flush_frames(const ac_resampler *r);

/* Writes the tail (input continued by zeros) and returns its length. */
int64_t ac_resampler_flush(ac_resampler *r, void *out);

int ac_resampler_path(const ac_resampler *r);

#endif
