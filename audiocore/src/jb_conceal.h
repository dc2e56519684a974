/* The jitter core's synthesis: audio it makes up, and audio it bends.
 *
 * Concealment repeats a pitch period of the last output with a fade (10 ms
 * at full level, then 50 ms to silence) and cross-fades back into the
 * source when it returns; a flush fades the output out the same way.
 * Time-scaling plays a frame's worth of output from more source (compress:
 * one period cross-faded into the next) or from less (stretch: one period
 * repeated), where the audio is periodic or quiet enough for it not to be
 * heard, to hold the buffer level between thresholds.
 *
 * Frames are native int16, interleaved; `pos` receives each output sample
 * frame's source position (jitter.h's ac_jb_pop). */
#ifndef AUDIOCORE_JB_CONCEAL_H
#define AUDIOCORE_JB_CONCEAL_H

#include <stdint.h>

#include "jb_ring.h"
#include "jitter.h"

typedef struct ac_conceal {
    int ch, frame;
    /* lag search: pitch from 400 Hz down, coarse at ~8 kHz */
    int minlag, maxlag, conceal_maxlag, step;
    /* concealment: a period of the last output, repeated with a fade */
    float *history; /* last hist_len sample frames emitted */
    int hist_len;
    float *period;
    float *offset; /* per channel: step between the last sample and the period's start */
    int lag, phase, active, period_silent;
    int64_t n, hold, decay, smooth;
    int64_t merge_len;
    /* fades to silence: after a flush, and at the end of a concealed turn */
    int fade_pending;
    int64_t fade_len, fade_left, end_fade;
    /* time-scaling, on the smoothed buffer level */
    double level_avg;
    int level_init;
    int64_t acc_on, acc_off, exp_on, exp_off;
    int accelerating, expanding;
    /* scratch */
    float *work;   /* mono analysis */
    float *frames; /* analysis copy, interleaved */
    int16_t *tmp;  /* source audio being analysed or merged */
} ac_conceal;

/* 0, or -1 when out of memory. */
int ac_conceal_init(ac_conceal *c, int rate, int channels, int frame);
void ac_conceal_free(ac_conceal *c);

/* Remembers the `n` frames just output (the material of a concealment). */
void ac_conceal_history(ac_conceal *c, const int16_t *out, int64_t n);

/* Conceals out[n0, n0 + n), continuing a concealment or starting one from
 * the history and the frame's first n0 samples. */
void ac_conceal_fill(ac_conceal *c, int16_t *out, int64_t *pos, int64_t n0, int64_t n,
                     ac_jb_stats *st);
/* Cross-fades from the running concealment into the `m` source frames at
 * the read position, ending the concealment. */
void ac_conceal_merge(ac_conceal *c, const ac_ring *src, int16_t *out, int64_t *pos, int64_t n0,
                      int64_t m, ac_jb_stats *st);

/* A flush: the next frame fades the output out over `fade` frames if
 * anything was playing (`was_active`), else stays silent. */
void ac_conceal_flush(ac_conceal *c, int64_t fade, int was_active);
/* The flush fade's part of the frame at out[0, frame); returns its length. */
int64_t ac_conceal_flush_fade(ac_conceal *c, int16_t *out, int64_t *pos, ac_jb_stats *st);
/* A turn ended while concealing: fades out into out[n0, n0 + room);
 * returns how many frames that took. */
int64_t ac_conceal_end(ac_conceal *c, int16_t *out, int64_t *pos, int64_t n0, int64_t room,
                       ac_jb_stats *st);
/* A fade is due or under way. */
int ac_conceal_fading(const ac_conceal *c);

/* Time-scaling thresholds (ac_jb_set_timescale). */
void ac_stretch_set(ac_conceal *c, int64_t acc_on, int64_t acc_off, int64_t exp_on,
                    int64_t exp_off);
/* Playout (re)starts: the level history and direction are forgotten. */
void ac_stretch_reset(ac_conceal *c);
/* Feeds the buffer level before a frame; decides compress, stretch or neither. */
void ac_stretch_observe(ac_conceal *c, int64_t level);
/* Plays one whole frame time-scaled from the `len` frames of source audio at
 * the read position, if the level asks for it and the audio allows it;
 * returns the source frames it consumed, 0 when it did nothing. */
int64_t ac_stretch_frame(ac_conceal *c, const ac_ring *src, int64_t len, int16_t *out,
                         int64_t *pos, ac_jb_stats *st);

#endif
