/* Where the echo canceller's filter window stands (docs/audio.md, "Echo
 * cancellation"): the bulk delay of the echo in whole blocks, found by the
 * phase coherence of far and near spectra, which moves the window by
 * partitions; and the fine alignment, which moves the filters' taps by the
 * echo path's shifts of up to 24 ms (32 ms at 24 and 48 kHz). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "aec_state.h"

/* Delay estimation: band of the coherence, its smoothing, the blocks a new
 * lag must win in a row, the blocks of filter kept ahead of the lag, and
 * the share of the best lag's score at which an earlier lag is taken instead. */
#define DELAY_LOW_HZ 300.0f
#define DELAY_HIGH_HZ 3500.0f
#define DELAY_TIME 0.4f
#define DELAY_CONFIRM 12
#define DELAY_CONTRAST 2.5f
#define DELAY_MARGIN 2
#define DELAY_EARLIEST 0.7f
#define DELAY_JUMP 2.0f
/* Fine alignment: smoothing of the cross-spectrum, the least phase
 * coherence (of 1) at its peak, the runs a shift must hold in a row, the
 * least shift acted on (40 us: 0.64 samples at 16 kHz, a phase error of
 * 0.9 rad at the band's top), and the half length of the windowed sinc
 * that moves the taps by a fraction of a sample. */
#define FINE_TIME 0.06f
#define FINE_STRENGTH 0.3f
#define FINE_CONFIRM 2
#define FINE_MIN_SHIFT 40e-6f
#define SINC_HALF 8
/* Its frame: the correlation is circular over it, and a shift shows whole
 * up to 3/8 of it either way.  FINE_REACH of that, past the 20 ms an
 * answer may start away from the last: 8 blocks at 8 and 16 kHz (24 ms),
 * 16 at 24 and 48 kHz (32 ms: the frame is a power of two of blocks).  It
 * is read on every (frame / 4)-th block only (every 2nd or 4th), at the
 * same smoothing time: a frame twice as long costs twice as much, and a
 * shift confirmed a block or two later is still found long before the
 * filters have learnt it.
 * FINE_STRENGTH is for FINE_BINS bins in the band (where it was set: 4
 * blocks at 8 and 16 kHz); incoherent phasors peak at about 1 / sqrt(bins),
 * so a band of fewer bins needs more, and one of more bins less. */
#define FINE_REACH 0.02f
#define FINE_BINS 102.0f
#define TRIAL_BLOCKS 2
/* By the time a shift is confirmed, the filters have been adapting to the
 * moved path for a few blocks, which the move would carry along, spoilt:
 * it is applied to a snapshot of the main filter taken while it was still
 * aligned (peak at 0 with at least FINE_ALIGNED of coherence), the older
 * of two taken SNAP_TIME apart, so that it predates the move, and only
 * if taken within SNAP_AGE of far-end activity: an older one may be of a
 * room that has changed since. */
#define FINE_ALIGNED 0.8f
#define SNAP_TIME 0.05f
#define SNAP_AGE 0.3f
/* The first estimate of a shift still mixes in blocks from before it (the
 * smoothing), so it falls short by a fraction of a sample, which costs
 * 10 dB or more at the band's top.  For REFINE_TIME after it, the estimate
 * made afresh is acted on from REFINE_MIN_SHIFT (8 us: 0.13 samples at
 * 16 kHz), the total applied to the same snapshot. */
#define REFINE_TIME 0.2f
#define REFINE_MIN_SHIFT 8e-6f
/* An agent's answer may start to play up to 20 ms away from where the last
 * one ended, and the filters, the shadow first, learn the moved path again
 * within a few tenths of a second: their echo estimates follow the echo,
 * and the shift fades from the cross-spectrum before it is confirmed.  For
 * ONSET_TIME of far end after ONSET_GAP of silence (between answers), the
 * fine alignment follows the estimate of the older snapshot instead, which
 * keeps the path as it was (if it may take a move: snapshot_usable), from
 * a cross-spectrum started afresh (the last answer's would hold the peak
 * at the old path for FINE_TIME).  A snapshot taken meanwhile, into the
 * slot followed, is of a filter aligned with that estimate: no matter. */
#define ONSET_GAP 0.25f
#define ONSET_TIME 0.3f

void ac_aec_align_setup(ac_aec *a)
{
    const float block_s = (float)a->block / (float)a->rate;
    a->delay_rate = fminf(1.0f, block_s / DELAY_TIME);
    const float bin_hz = (float)a->rate / (float)a->frame;
    int lo = (int)ceilf(DELAY_LOW_HZ / bin_hz), hi = (int)floorf(DELAY_HIGH_HZ / bin_hz);
    lo = lo < 1 ? 1 : lo;
    hi = hi > a->block ? a->block : hi;
    a->est_lo = lo;
    a->est_bins = hi > lo ? hi - lo : 1;
    a->fine_span = 4;
    while (3.0f * (float)a->fine_span / 8.0f * block_s < FINE_REACH)
        a->fine_span *= 2;
    a->fine_every = a->fine_span / 4;
    a->fine_frame = a->fine_span * a->block;
    a->fine_stride = (a->fine_frame / 2 + 1 + 15) & ~15;
    const float fine_hz = (float)a->rate / (float)a->fine_frame;
    lo = (int)ceilf(DELAY_LOW_HZ / fine_hz);
    hi = (int)floorf(DELAY_HIGH_HZ / fine_hz);
    lo = lo < 1 ? 1 : lo;
    hi = hi > a->fine_frame / 2 ? a->fine_frame / 2 : hi;
    a->fine_lo = lo;
    a->fine_hi = hi > lo ? hi : lo + 1;
    a->fine_strength = FINE_STRENGTH * sqrtf(FINE_BINS / (float)(a->fine_hi - a->fine_lo));
    a->fine_rate = fminf(1.0f, (float)a->fine_every * block_s / FINE_TIME);
    a->fine_min = FINE_MIN_SHIFT * (float)a->rate;
    a->snap_blocks = (int)ceilf(SNAP_TIME / block_s);
    a->snap_age = (int)ceilf(SNAP_AGE / block_s);
    a->refine_blocks = (int)ceilf(REFINE_TIME / block_s);
    a->refine_min = REFINE_MIN_SHIFT * (float)a->rate;
    a->onset_gap = (int)ceilf(ONSET_GAP / block_s);
    a->onset_blocks = (int)ceilf(ONSET_TIME / block_s);
}

/* Moves the filter's window so that partition 0 models lag `offset`,
 * keeping what it learnt of the lags both windows cover. */
static void shift_partitions(ac_aec *a, float *wr, float *wi, int shift)
{
    const int P = a->partitions;
    const size_t row = sizeof(float) * (size_t)a->stride;
    for (int k = 0; k < P; k++) {
        /* forwards when moving rows down, backwards when moving them up */
        int p = shift > 0 ? k : P - 1 - k;
        float *dr = wr + (size_t)p * a->stride, *di = wi + (size_t)p * a->stride;
        if (p + shift >= 0 && p + shift < P) {
            memcpy(dr, wr + (size_t)(p + shift) * a->stride, row);
            memcpy(di, wi + (size_t)(p + shift) * a->stride, row);
        } else {
            memset(dr, 0, row);
            memset(di, 0, row);
        }
    }
}

static void move_filter(ac_aec *a, int offset)
{
    const int shift = offset - a->offset;
    if (shift != 0) {
        shift_partitions(a, a->wr, a->wi, shift);
        shift_partitions(a, a->vr, a->vi, shift);
    }
    a->offset = offset;
    /* The echo estimate jumps with the window: the fine alignment starts over. */
    memset(a->cr, 0, sizeof(float) * (size_t)a->fine_stride);
    memset(a->ci, 0, sizeof(float) * (size_t)a->fine_stride);
    a->fine_count = 0;
    a->fine_hold = a->fine_span;
    a->refine_until = -1;
    a->snap_block[0] = a->snap_block[1] = -1;
    a->onset_left = 0; /* the snapshot followed is gone with them */
    /* A jump of more than the margin leaves the echo's start where the
     * filter had learnt nothing: it starts over with the fixed step (the
     * residual-echo step would stay at zero with no echo estimate). */
    if (shift > DELAY_MARGIN || shift < -DELAY_MARGIN)
        a->active_blocks = 0;
}

/* Bulk delay: for every lag L of whole blocks, the phase coherence of the
 * near-end spectrum with the far end's L blocks ago, smoothed over time on
 * blocks where both are active.  Only the phase counts (each bin is a unit
 * phasor), so loud bins do not drown the rest; an echo path that is the
 * same from block to block gives a steady phase difference, hence a large
 * smoothed sum, at its lag only. */
void ac_aec_estimate_delay(ac_aec *a, int slot, int near_active)
{
    const int nb = a->est_bins, lo = a->est_lo;
    float *pr = a->pr + (size_t)slot * nb, *pi = a->pi + (size_t)slot * nb;
    for (int f = 0; f < nb; f++) {
        float re = a->xr[(size_t)slot * a->stride + lo + f];
        float im = a->xi[(size_t)slot * a->stride + lo + f];
        float m = sqrtf(re * re + im * im);
        pr[f] = m > 0.0f ? re / m : 0.0f;
        pi[f] = m > 0.0f ? im / m : 0.0f;
    }
    if (!near_active)
        return;
    float nr[4096], ni[4096];
    for (int f = 0; f < nb; f++) {
        float re = a->dr[lo + f], im = a->di[lo + f];
        float m = sqrtf(re * re + im * im);
        nr[f] = m > 0.0f ? re / m : 0.0f;
        ni[f] = m > 0.0f ? im / m : 0.0f;
    }
    const float c = a->delay_rate;
    int updated = 0;
    for (int L = 0; L <= a->max_lag && (uint64_t)L <= a->blocks; L++) {
        int s = slot_of(a, L);
        if (!a->far_active[s])
            continue;
        updated = 1;
        const float *xr = a->pr + (size_t)s * nb, *xi = a->pi + (size_t)s * nb;
        float *sr = a->sr + (size_t)L * nb, *si = a->si + (size_t)L * nb;
        float total = 0.0f;
        for (int f = 0; f < nb; f++) {
            /* near * conj(far) */
            float re = nr[f] * xr[f] + ni[f] * xi[f];
            float im = ni[f] * xr[f] - nr[f] * xi[f];
            sr[f] += c * (re - sr[f]);
            si[f] += c * (im - si[f]);
            total += sr[f] * sr[f] + si[f] * si[f];
        }
        a->score[L] = total / (float)nb;
    }
    if (!updated)
        return;
    int best = 0;
    for (int L = 1; L <= a->max_lag; L++)
        if (a->score[L] > a->score[best])
            best = L;
    /* The earliest lag about as coherent as the best: a room's reflections
     * and a voice's periodicity make later lags coherent too, at times a
     * little more than the direct sound's, and a window that starts after
     * the direct sound cancels nothing of it. */
    for (int L = 0; L < best; L++)
        if (a->score[L] >= DELAY_EARLIEST * a->score[best]) {
            best = L;
            break;
        }
    /* Incoherent phasors smooth to a score of about c / 2, and in a
     * reverberant room the true lag's stands only a few times above the
     * other lags' (its echo is spread over many): a lag is taken when it
     * stands DELAY_CONTRAST times above the mean of all lags and above the
     * current lag's. */
    float mean = 0.0f;
    for (int L = 0; L <= a->max_lag; L++)
        mean += a->score[L];
    mean /= (float)(a->max_lag + 1);
    const float floor = fmaxf(DELAY_CONTRAST * mean, 2.0f * c);
    const float current = a->lag >= 0 ? a->score[a->lag] : 0.0f;
    /* A move past the filter's margin throws away what it learnt: the
     * current lag must have lost clearly (a path that changed leaves it at
     * the incoherent level), not merely been overtaken for a while. */
    const float lead = abs(best - a->lag) > DELAY_MARGIN ? DELAY_JUMP : 1.25f;
    if (best == a->lag || a->score[best] < floor || a->score[best] < lead * current) {
        a->candidate_count = 0;
        return;
    }
    if (best == a->candidate) {
        a->candidate_count++;
    } else {
        a->candidate = best;
        a->candidate_count = 1;
    }
    if (a->candidate_count >= DELAY_CONFIRM) {
        a->lag = best;
        a->candidate_count = 0;
        move_filter(a, best > DELAY_MARGIN ? best - DELAY_MARGIN : 0);
    }
}


/* A filter's impulse response, the partitions end to end, into `taps`;
 * returns the index of its largest tap. */
static int load_taps(ac_aec *a, const float *wr, const float *wi)
{
    const int N = a->block, P = a->partitions;
    const size_t S = (size_t)a->stride;
    int peak = 0;
    for (int p = 0; p < P; p++) {
        ac_rfft_inverse(a->fft, wr + p * S, wi + p * S, a->work);
        memcpy(a->taps + (size_t)p * N, a->work, sizeof(float) * (size_t)N);
    }
    for (int n = 1; n < P * N; n++)
        if (fabsf(a->taps[n]) > fabsf(a->taps[peak]))
            peak = n;
    return peak;
}

/* The impulse response in `taps`, later by `shift` samples, a fraction
 * included, back into the filter (wr, wi): band-limited interpolation with
 * a Hann-windowed sinc, exact for whole samples.  Taps moved past either
 * end of the window are lost. */
static void move_taps(ac_aec *a, float *wr, float *wi, float shift)
{
    const int N = a->block, P = a->partitions, len = P * N;
    const size_t S = (size_t)a->stride;
    const float *h = a->taps;
    float *w = a->work;
    const int whole = (int)floorf(shift);
    const float frac = shift - (float)whole;
    const float pi = 3.14159265358979f;
    float coef[2 * SINC_HALF];
    for (int j = 0; j < 2 * SINC_HALF; j++) {
        int m = j - SINC_HALF + 1;
        float x = (float)m - frac;
        if (frac == 0.0f)
            coef[j] = m == 0 ? 1.0f : 0.0f;
        else
            coef[j] = sinf(pi * x) / (pi * x) * (0.5f + 0.5f * cosf(pi * x / SINC_HALF));
    }
    for (int p = 0; p < P; p++) {
        for (int k = 0; k < N; k++) {
            /* h'[n] = sum over m of h[n - whole - m] sinc(m - frac) */
            int src = p * N + k - whole + SINC_HALF - 1;
            float acc = 0.0f;
            for (int j = 0; j < 2 * SINC_HALF; j++, src--)
                if (src >= 0 && src < len)
                    acc += h[src] * coef[j];
            w[k] = acc;
        }
        memset(w + N, 0, sizeof(float) * (size_t)N);
        ac_rfft_forward(a->fft, w, wr + p * S, wi + p * S);
    }
}

/* Whether the moved filter (trial_r, trial_i, at the window's offset as it
 * now stands) would have left less of the echo than the main filter did
 * over the last TRIAL_BLOCKS blocks: after a change of the room rather
 * than a shift, the cross-spectrum of a filter still learning points at
 * stray shifts, and moving its taps by them undoes what it learnt. */
static int trial_wins(ac_aec *a)
{
    /* yr, yi and work are free here: run_block has taken what it needs of
     * them for this block, and the next filter output writes them anew */
    const int N = a->block, F = a->fine_frame;
    double moved = 0.0, kept = 0.0;
    for (int k = 0; k < TRIAL_BLOCKS; k++) {
        ac_aec_filter_output_back(a, a->trial_r, a->trial_i, a->yr, a->yi, k);
        ac_rfft_inverse(a->fft, a->yr, a->yi, a->work);
        const float *mic = a->fine_near + F - (k + 1) * N, *est = a->fine_echo + F - (k + 1) * N;
        for (int n = 0; n < N; n++) {
            float e = mic[n] - a->work[N + n], d = mic[n] - est[n];
            moved += (double)e * e;
            kept += (double)d * d;
        }
    }
    return moved < kept;
}

/* Whether snapshot `slot` may take a move: taken, at the window's offset
 * as it stands, and within SNAP_AGE of far-end activity. */
static int snapshot_usable(const ac_aec *a, int slot)
{
    return a->snap_block[slot] >= 0 && a->snap_offset[slot] == a->offset &&
           a->active_blocks - a->snap_active[slot] <= a->snap_age;
}

/* The fine alignment's history: the last fine_span blocks of the near end,
 * of the main filter's echo estimate (`echo`, the current block: what a
 * move is tried against) and of the estimate the shift is measured on (the
 * same, or the older snapshot's: ONSET_TIME). */
void ac_aec_fine_feed(ac_aec *a, const float *echo)
{
    const int N = a->block, keep = a->fine_frame - N;
    if (!a->far_active[slot_of(a, 0)]) {
        if (a->silent_blocks < a->onset_gap)
            a->silent_blocks++;
    } else {
        if (a->silent_blocks >= a->onset_gap && snapshot_usable(a, a->snap_older)) {
            a->onset_slot = a->snap_older;
            a->onset_left = a->onset_blocks;
            memset(a->cr, 0, sizeof(float) * (size_t)a->fine_stride);
            memset(a->ci, 0, sizeof(float) * (size_t)a->fine_stride);
        } else if (a->onset_left > 0) {
            a->onset_left--;
        }
        a->silent_blocks = 0;
    }
    memmove(a->fine_near, a->fine_near + N, sizeof(float) * (size_t)keep);
    memcpy(a->fine_near + keep, a->near_in, sizeof(float) * (size_t)N);
    memmove(a->fine_echo, a->fine_echo + N, sizeof(float) * (size_t)keep);
    memcpy(a->fine_echo + keep, echo, sizeof(float) * (size_t)N);
    memmove(a->fine_ref, a->fine_ref + N, sizeof(float) * (size_t)keep);
    if (a->onset_left > 0) {
        /* yr, yi and work are free here (run_block has taken the main
         * filter's output), as in trial_wins */
        const size_t at = (size_t)a->onset_slot * a->partitions * a->stride;
        ac_aec_filter_output(a, a->snap_r + at, a->snap_i + at, a->yr, a->yi);
        ac_rfft_inverse(a->fft, a->yr, a->yi, a->work);
        echo = a->work + N;
    }
    memcpy(a->fine_ref + keep, echo, sizeof(float) * (size_t)N);
    if (a->fine_hold > 0)
        a->fine_hold--;
}

/* Fine alignment.  Each new answer of an agent may start to play a few ms
 * away from where its reference says (a render quantum, a prebuffer's
 * jitter: up to 12 ms from one answer to the next in recorded runs, now
 * and then 20): the bulk delay stays
 * put, and the filter, a few samples off, removes only a few dB until it
 * has learnt the path again.  Such a shift shows in the cross-spectrum of
 * the near end and the filter's own echo estimate (or a snapshot's:
 * ONSET_TIME) over the last fine_span blocks: while the estimate is right
 * that is real (what the filter leaves is uncorrelated with its estimate);
 * when the echo comes t samples later it turns by -w t at w radians per
 * sample.  Its phase correlation (unit phasors back to the time domain)
 * peaks at the whole samples of t, the phase slope left after them gives
 * the fraction, and a shift that holds for FINE_CONFIRM runs in a row moves
 * both filters' taps at once. */
void ac_aec_fine_align(ac_aec *a)
{
    /* the echo history still holds estimates from before the last move;
     * or not a block it runs on */
    if (a->fine_hold > 0 || a->blocks % (uint64_t)a->fine_every != 0)
        return;
    const int N = a->block, F = a->fine_frame, lo = a->fine_lo, hi = a->fine_hi;
    float *w = a->fine_work, *ur = a->fur, *ui = a->fui;
    const float *dr = a->fnr, *di = a->fni, *yr = a->fyr, *yi = a->fyi;
    ac_rfft_forward(a->fine_fft, a->fine_near, a->fnr, a->fni);
    ac_rfft_forward(a->fine_fft, a->fine_ref, a->fyr, a->fyi);
    memset(ur, 0, sizeof(float) * (size_t)a->fine_stride);
    memset(ui, 0, sizeof(float) * (size_t)a->fine_stride);
    const float c = a->fine_rate;
    for (int f = lo; f < hi; f++) {
        /* near * conj(echo estimate) */
        float re = dr[f] * yr[f] + di[f] * yi[f];
        float im = di[f] * yr[f] - dr[f] * yi[f];
        a->cr[f] += c * (re - a->cr[f]);
        a->ci[f] += c * (im - a->ci[f]);
        float m = sqrtf(a->cr[f] * a->cr[f] + a->ci[f] * a->ci[f]);
        ur[f] = m > 0.0f ? a->cr[f] / m : 0.0f;
        ui[f] = m > 0.0f ? a->ci[f] / m : 0.0f;
    }
    ac_rfft_inverse(a->fine_fft, ur, ui, w);
    /* Lags within 3/8 of the frame either way; w[t] reaches 2 * bins / F
     * where every bin agrees. */
    const int range = 3 * F / 8;
    int best = 0;
    for (int t = -range; t <= range; t++)
        if (w[t < 0 ? F + t : t] > w[best < 0 ? F + best : best])
            best = t;
    const float strength = w[best < 0 ? F + best : best] * (float)F / (2.0f * (float)(hi - lo));
    /* The phase left after `best` whole samples, e^(j w best) turning bin
     * by bin by a fixed step; its slope by least squares through zero,
     * each bin weighted by its magnitude. */
    const double bin_omega = 2.0 * 3.14159265358979323846 / F;
    double turn_r = cos(bin_omega * best * lo), turn_i = sin(bin_omega * best * lo);
    const double step_r = cos(bin_omega * best), step_i = sin(bin_omega * best);
    double num = 0.0, den = 0.0;
    for (int f = lo; f < hi; f++) {
        double omega = bin_omega * f;
        double re = a->cr[f] * turn_r - a->ci[f] * turn_i;
        double im = a->cr[f] * turn_i + a->ci[f] * turn_r;
        double m = sqrt(re * re + im * im);
        num += m * omega * atan2(im, re);
        den += m * omega * omega;
        double next_r = turn_r * step_r - turn_i * step_i;
        turn_i = turn_r * step_i + turn_i * step_r;
        turn_r = next_r;
    }
    const float shift = (float)best - (den > 0.0 ? (float)(num / den) : 0.0f);

    const size_t size = sizeof(float) * (size_t)a->partitions * (size_t)a->stride;
    if (a->refine_until >= 0 && (int64_t)a->blocks >= a->refine_until) {
        /* the snapshots predate the shift: none until aligned again */
        a->refine_until = -1;
        a->snap_block[0] = a->snap_block[1] = -1;
    }
    const int refining = a->refine_until >= 0;
    if (!refining && best == 0 && strength >= FINE_ALIGNED && fabsf(shift) < 0.5f * a->fine_min) {
        int newer = 1 - a->snap_older;
        if (a->snap_block[newer] < 0 || (int64_t)a->blocks >= a->snap_block[newer] + a->snap_blocks) {
            const size_t at = (size_t)a->snap_older * a->partitions * a->stride;
            memcpy(a->snap_r + at, a->wr, size);
            memcpy(a->snap_i + at, a->wi, size);
            a->snap_block[a->snap_older] = (int64_t)a->blocks;
            a->snap_offset[a->snap_older] = a->offset;
            a->snap_active[a->snap_older] = a->active_blocks;
            a->snap_older = newer;
        }
    }
    if (strength < a->fine_strength || fabsf(shift) < (refining ? a->refine_min : a->fine_min)) {
        a->fine_count = 0;
        return;
    }
    if (a->fine_count > 0 && abs(best - a->fine_candidate) <= 1) {
        a->fine_count++;
    } else {
        a->fine_candidate = best;
        a->fine_count = 1;
    }
    if (a->fine_count < FINE_CONFIRM)
        return;
    if (!refining) {
        a->snap_base = snapshot_usable(a, a->snap_older) ? a->snap_older : -1;
        a->snap_moved = 0.0f;
        a->refine_until = (int64_t)a->blocks + a->refine_blocks;
    }
    a->snap_moved += shift;
    /* The move applies to the snapshot (the whole shift since it, and the
     * blocks the window has moved since) or else to the filter as it is. */
    const float *from_r = a->wr, *from_i = a->wi;
    float move = shift;
    if (a->snap_base >= 0) {
        const size_t at = (size_t)a->snap_base * a->partitions * a->stride;
        from_r = a->snap_r + at;
        from_i = a->snap_i + at;
        move = a->snap_moved + (float)((a->snap_offset[a->snap_base] - a->offset) * N);
    }
    /* An echo that comes earlier by more than the margin would leave the
     * direct sound within a block of the window's start, or before it: the
     * window moves earlier by whole blocks (its tail's last blocks lost). */
    const int peak = load_taps(a, from_r, from_i);
    int room = 0;
    while (room < a->offset && (float)peak + move + (float)(room * N) < (float)N)
        room++;
    move_taps(a, a->trial_r, a->trial_i, move + (float)(room * N));
    a->offset -= room;
    if (!trial_wins(a)) {
        a->offset += room;
        a->snap_moved -= shift;
        if (!refining)
            a->refine_until = -1;
        a->fine_count = 0;
        return;
    }
    memcpy(a->wr, a->trial_r, size);
    memcpy(a->wi, a->trial_i, size);
    memcpy(a->vr, a->trial_r, size);
    memcpy(a->vi, a->trial_i, size);
    /* the filters are aligned again: their own estimate is the one to refine on */
    a->onset_left = 0;
    memset(a->cr, 0, sizeof(float) * (size_t)a->fine_stride);
    memset(a->ci, 0, sizeof(float) * (size_t)a->fine_stride);
    a->fine_count = 0;
    a->fine_hold = a->fine_span;
}
