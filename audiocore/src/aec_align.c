/* Where the echo canceller's filter window stands (docs/audio.md, "Echo
 * cancellation"): the bulk delay of the echo in whole blocks, found by the
 * phase coherence of far and near spectra, which moves the window by
 * partitions. */
#include <math.h>
#include <string.h>

#include "aec_state.h"

/* Delay estimation: band of the coherence, its smoothing, the blocks a new
 * lag must win in a row, and the blocks of filter kept ahead of the lag. */
#define DELAY_LOW_HZ 300.0f
#define DELAY_HIGH_HZ 3500.0f
#define DELAY_TIME 0.4f
#define DELAY_CONFIRM 12
#define DELAY_CONTRAST 2.5f
#define DELAY_MARGIN 2

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
    if (best == a->lag || a->score[best] < floor || a->score[best] < 1.25f * current) {
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

