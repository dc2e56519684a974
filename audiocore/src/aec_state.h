/* The echo canceller's state, shared by its parts (internal: aec.h is the
 * interface).
 *
 *   aec.c        life cycle, the block pipeline (filters, step control,
 *                residual echo suppression) and streaming;
 *   aec_align.c  where the filter's window stands: the bulk delay in
 *                whole blocks and the fine alignment of shifts up to
 *                24 ms (32 ms at 24 and 48 kHz);
 *   aec_mac.c    the filters' complex multiply-accumulate, per SIMD path. */
#ifndef AUDIOCORE_AEC_STATE_H
#define AUDIOCORE_AEC_STATE_H

#include <stdint.h>

#include "aec.h"
#include "fft.h"

typedef void (*mac_kernel)(float *yr, float *yi, const float *ar, const float *ai, const float *br,
                           const float *bi, int n);

struct ac_aec {
    int rate, block, frame, bins, stride, partitions, max_lag, ring;
    int in_format, out_format, suppress, path;
    mac_kernel mac;      /* y += a * b */
    mac_kernel mac_conj; /* y += a * conj(b) */
    ac_rfft *fft;

    /* per-block factors from the times above */
    float leak_rate, mean_rate, delay_rate, compare_rate, residual_decay;
    int adapt_blocks;
    float regularisation;

    /* time domain */
    float *far_in, *near_in; /* the block being filled */
    int fill;
    float *far_frame, *near_frame; /* previous + current block */
    float *err_prev, *echo_prev;   /* previous block of error and echo estimate */
    float *ola;                    /* second half of the last synthesis frame */
    float *outq;                   /* output not yet returned */
    int outq_len;
    float *window; /* sqrt-Hann of 2 * block, w[n]^2 + w[n + block]^2 = 1 */
    float *work;   /* 2 * block */

    /* far-end spectra, one slot per block, newest at blocks % ring */
    float *xr, *xi, *xpow;
    unsigned char *far_active;

    /* the filter: partition p models lag `offset + p` blocks */
    float *wr, *wi;
    /* the shadow filter: same window, a fixed fast step, never trusted
     * until its error is clearly below the main filter's */
    float *vr, *vi;
    float main_power, shadow_power; /* smoothed error powers */
    /* whether an echo was found (ECHO_FOUND in aec.c): the main filter's
     * error and the microphone's powers smoothed where the far end plays */
    float found_err, found_mic, found_rate;
    int echo_found;
    int offset, constrain_next;

    /* per-block spectra and per-bin state, `stride` floats each */
    float *yr, *yi, *er, *ei, *gr, *gi, *x2;
    float *ewr, *ewi, *ywr, *ywi;
    float *mean_e, *mean_y, *residual, *gain;
    double pey, pyy;
    float leak;
    int active_blocks;

    /* delay estimator over bins [est_lo, est_lo + est_bins) */
    int est_lo, est_bins;
    float *dr, *di;   /* near-end spectrum (bins, stride) */
    float *pr, *pi;   /* unit phasors of the far end per ring slot */
    float *sr, *si;   /* smoothed coherence per lag 0..max_lag */
    float *score;
    int lag, candidate, candidate_count;

    /* fine alignment: the smoothed cross-spectrum of the near end and the
     * echo estimate over its own frame (fine_stride, below), the shift it
     * points to and for how many blocks in a row; `taps` holds a filter's
     * impulse response (partitions * block) while it is moved */
    float *cr, *ci, *taps;
    float fine_rate, fine_min;
    int fine_candidate, fine_count;
    /* its own frame of fine_span blocks (a shift of more than a block shows
     * whole; FINE_REACH in aec_align.c), run every fine_every blocks: the
     * last fine_frame samples of the near end and of the echo estimate, a
     * work buffer, their spectra and the unit cross-spectrum over
     * fine_stride bins, the band [fine_lo, fine_hi), the coherence a shift
     * needs for that many bins, and the blocks after a move during which
     * the echo history still holds estimates from before it */
    ac_rfft *fine_fft;
    int fine_span, fine_every, fine_frame, fine_stride, fine_lo, fine_hi, fine_hold;
    float fine_strength;
    /* a move is tried on a copy of the main filter first */
    float *trial_r, *trial_i;
    float *fine_near, *fine_echo, *fine_work, *fnr, *fni, *fyr, *fyi, *fur, *fui;
    /* the estimate the shift is measured on (main's, or a snapshot's after
     * an onset: ONSET_TIME in aec_align.c), the far end's silent blocks in
     * a row, the snapshot followed and for how many more active blocks,
     * and the blocks of silence and of following from the times */
    float *fine_ref;
    int silent_blocks, onset_slot, onset_left, onset_gap, onset_blocks;
    /* two snapshots of the main filter, taken while it was aligned (one a
     * slot of partitions * stride in snap_r, snap_i), the block each was
     * taken at (-1: none), its window offset, the older one's slot */
    float *snap_r, *snap_i;
    int64_t snap_block[2];
    int snap_offset[2], snap_older, snap_blocks;
    /* the active far-end blocks counted when each was taken, and how many
     * more a snapshot may be old (the path may have changed since) */
    int snap_active[2], snap_age;
    /* after a shift: until which block it is refined, the snapshot it was
     * applied to (-1: none) and the total shift applied to it */
    int64_t refine_until;
    int snap_base, refine_blocks;
    float snap_moved, refine_min;

    uint64_t blocks;
};

/* Ring slot of the far-end block `lag` blocks before the current one. */
static inline int slot_of(const ac_aec *a, int64_t lag)
{
    int64_t b = (int64_t)a->blocks - lag;
    int64_t s = b % a->ring;
    return (int)(s < 0 ? s + a->ring : s);
}

/* aec_mac.c */
void ac_aec_pick_kernels(ac_aec *a);
void ac_aec_filter_output(ac_aec *a, const float *wr, const float *wi, float *yr, float *yi);
/* The same for the block `back` blocks before the current one. */
void ac_aec_filter_output_back(ac_aec *a, const float *wr, const float *wi, float *yr, float *yi,
                               int back);
void ac_aec_filter_update(ac_aec *a, float *wr, float *wi, const float *gr, const float *gi);

/* aec_align.c */
void ac_aec_align_setup(ac_aec *a);
void ac_aec_estimate_delay(ac_aec *a, int slot, int near_active);
void ac_aec_fine_feed(ac_aec *a, const float *echo);
void ac_aec_fine_align(ac_aec *a);

#endif
