/* Streaming acoustic echo canceller (docs/audio.md, "Echo cancellation").
 *
 * Mono far end (what the loudspeaker plays) and near end (the microphone)
 * in equal lengths; out comes the near end without the echo of the far
 * end.  Internally everything runs in blocks of `block` samples:
 *
 *   - a bulk delay estimator (phase coherence of far and near spectra at
 *     every lag of whole blocks up to `max_lag` blocks) finds where the echo
 *     starts (the earliest lag about as coherent as the best) and moves the
 *     filter's window there;
 *   - a fine alignment (the phase of the near end against the filter's own
 *     echo estimate over the last 8 blocks, 16 at 24 and 48 kHz, or a
 *     snapshot's at the start of an answer) finds shifts of the echo path
 *     by up to 24 ms (32 ms) and moves both filters' taps by them at once;
 *   - a partitioned-block frequency-domain adaptive filter (`partitions`
 *     partitions of `block` taps, FFTs of 2 * block) models the echo path
 *     from that window on, its step per bin set from an estimate of the
 *     residual echo in the error (small in double talk), beside a shadow
 *     filter with a fixed step that replaces it when clearly better (after
 *     the path changes, under drift) and is reset to it when it diverges;
 *   - a residual echo suppressor (a gain per bin on windowed, 50% overlapped
 *     frames) removes what the linear filter leaves.
 *
 * Output sample t is the cleaned near-end sample t - ac_aec_latency(); the
 * first latency samples are zeros.  Every block depends only on the input
 * samples, never on how they were split into calls, so the output is the
 * same for any chunking (on a given SIMD path). */
#ifndef AUDIOCORE_AEC_H
#define AUDIOCORE_AEC_H

#include <stdint.h>

typedef struct ac_aec ac_aec;

/* `block` is a power of two from 16 to 4096; `partitions` 1 to 1024;
 * `max_lag` 0 to 4096 blocks; formats as pcm.h's; `suppress` nonzero turns
 * the residual echo suppressor on.  NULL when out of memory or when an
 * argument is out of range. */
ac_aec *ac_aec_new(int rate, int block, int partitions, int max_lag, int in_format,
                   int out_format, int suppress, int path);
void ac_aec_free(ac_aec *a);

/* Back to a new stream: filter, estimates and buffers cleared. */
void ac_aec_reset(ac_aec *a);

/* Consumes `n` samples of `far` and of `near` (both in the input format)
 * and writes `n` samples to `out` (in the output format). */
void ac_aec_process(ac_aec *a, const void *far, const void *near, int64_t n, void *out);

/* Index of the first NaN or infinity among `n` float32 samples, or -1. */
int64_t ac_aec_first_nonfinite(const void *buf, int64_t n);

/* Samples between a near-end sample and its cleaned output: 2 * block - 1. */
int ac_aec_latency(const ac_aec *a);

/* The echo's bulk delay found so far, in samples (a multiple of the block),
 * or -1 while none is found. */
int64_t ac_aec_echo_delay(const ac_aec *a);

/* Whether an echo has been found to cancel: the bulk delay, or the filter
 * taking a share of the microphone out while the far end plays.  Until
 * then the output is the near end unchanged. */
int ac_aec_echo_found(const ac_aec *a);

int ac_aec_path(const ac_aec *a);

#endif
