/* The echo canceller's life cycle, its block pipeline (both filters, the
 * step control, residual echo suppression) and streaming; aec.h says what
 * it does, aec_state.h how it is split. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "aec_state.h"
#include "fft.h"
#include "pcm.h"
#include "simd.h"

/* ---- tuning ------------------------------------------------------------
 * Levels are per sample of full scale squared (float samples in [-1, 1]);
 * times are in seconds and turned into per-block factors at creation. */

/* A block is active when its mean square exceeds -70 dBFS: below that a
 * reference carries no information worth adapting or estimating delay on. */
#define ACTIVE_POWER 1e-7f
/* Regularisation of the filter's normalisation: white noise at -60 dBFS. */
#define REGULARISATION_POWER 1e-6f
/* Largest normalised step (of 2 for stability), and the step before the
 * residual-echo estimate means anything: the first ADAPT_TIME seconds of
 * active far end. */
#define MU_MAX 1.0f
#define MU_START 0.5f
/* The shadow filter's fixed step, and the error power ratios (smoothed
 * over COMPARE_TIME) at which it replaces the main filter or is reset to it. */
#define SHADOW_MU 1.0f
#define SHADOW_WIN 0.5f
#define SHADOW_LOSE 4.0f
#define COMPARE_TIME 0.1f
/* An echo is found once the bulk delay is, or once the main filter's error
 * power is below ECHO_FOUND of the microphone's, both smoothed over
 * FOUND_TIME of blocks where the far end plays.  Until then the output is
 * the microphone: with no echo at all, a near end talking over the far end
 * teaches the filter a false path, whose estimate the suppressor would
 * take out of the near end's words.  Over 0.1 s, two voices holding
 * vowels with harmonics in common passed for an echo now and then. */
#define ECHO_FOUND 0.5f
#define FOUND_TIME 0.5f
#define ADAPT_TIME 0.5f
/* The leakage regression sees only the part of the residual whose power
 * follows the echo estimate's bin by bin, so it reads low (by 3 to 30 times
 * on noise and speech in rooms); the step takes it times this. */
#define LEAK_STEP_GAIN 16.0f
/* The least leakage.  The regression reads 0 now and then (in 2.5% of the
 * active blocks of the shifts benchmark's answers), even while the filter
 * still leaves much of the echo (seen with its error 7 dB under the
 * microphone): at 0 the main filter's step is 0 and the suppressor takes
 * none of the echo estimate, so the residual passes until the regression
 * reads it again.  At this floor, read high as below, the residual
 * estimate is 18 dB under the echo estimate. */
#define LEAK_FLOOR 1e-3
/* How fast the leakage estimate (residual echo over echo estimate) follows,
 * at full speed (it slows down when the error holds more than echo). */
#define LEAK_TIME 0.25f
/* Per-bin means the leakage regression is taken around. */
#define MEAN_TIME 0.05f
/* Residual echo suppression: over-subtraction, the deepest gain, and the
 * decay of the residual estimate (reverberation beyond the filter). */
#define OVERSUBTRACT 8.0f
/* Below this share of the error kept by the per-bin gains, a frame is
 * taken for echo and noise alone. */
#define NEAR_SHARE 0.5f
/* A loudspeaker driven into clipping spreads its distortion over the whole
 * band, where the linear filter has no part of it: the residual estimate of
 * every bin includes this share of the echo estimate's mean power. */
#define NONLINEAR_SHARE 0.1f
#define GAIN_FLOOR 1e-3f
#define RESIDUAL_DECAY_TIME 0.15f /* seconds per 60 dB */

/* ---- life cycle --------------------------------------------------------- */

/* Every array of the state, so that new, free and reset walk one list. */
#define AEC_ARRAYS(X)                                                                              \
    X(far_in, a->block)                                                                            \
    X(near_in, a->block)                                                                           \
    X(far_frame, a->frame)                                                                         \
    X(near_frame, a->frame)                                                                        \
    X(err_prev, a->block)                                                                          \
    X(echo_prev, a->block)                                                                         \
    X(ola, a->block)                                                                               \
    X(outq, a->frame)                                                                              \
    X(work, a->frame)                                                                              \
    X(xr, (size_t)a->ring * a->stride)                                                             \
    X(xi, (size_t)a->ring * a->stride)                                                             \
    X(xpow, (size_t)a->ring * a->stride)                                                           \
    X(wr, (size_t)a->partitions * a->stride)                                                       \
    X(wi, (size_t)a->partitions * a->stride)                                                       \
    X(vr, (size_t)a->partitions * a->stride)                                                       \
    X(vi, (size_t)a->partitions * a->stride)                                                       \
    X(yr, a->stride)                                                                               \
    X(yi, a->stride)                                                                               \
    X(er, a->stride)                                                                               \
    X(ei, a->stride)                                                                               \
    X(gr, a->stride)                                                                               \
    X(gi, a->stride)                                                                               \
    X(x2, a->stride)                                                                               \
    X(ewr, a->stride)                                                                              \
    X(ewi, a->stride)                                                                              \
    X(ywr, a->stride)                                                                              \
    X(ywi, a->stride)                                                                              \
    X(mean_e, a->stride)                                                                           \
    X(mean_y, a->stride)                                                                           \
    X(residual, a->stride)                                                                         \
    X(gain, a->stride)                                                                             \
    X(dr, a->stride)                                                                               \
    X(di, a->stride)                                                                               \
    X(pr, (size_t)a->ring * a->est_bins)                                                           \
    X(pi, (size_t)a->ring * a->est_bins)                                                           \
    X(sr, (size_t)(a->max_lag + 1) * a->est_bins)                                                  \
    X(si, (size_t)(a->max_lag + 1) * a->est_bins)                                                  \
    X(score, (size_t)(a->max_lag + 1))                                                             \
    X(cr, a->fine_stride)                                                                          \
    X(ci, a->fine_stride)                                                                          \
    X(fine_near, a->fine_frame)                                                                    \
    X(fine_echo, a->fine_frame)                                                                    \
    X(fine_ref, a->fine_frame)                                                                     \
    X(fine_work, a->fine_frame)                                                                    \
    X(fnr, a->fine_stride)                                                                         \
    X(fni, a->fine_stride)                                                                         \
    X(fyr, a->fine_stride)                                                                         \
    X(fyi, a->fine_stride)                                                                         \
    X(fur, a->fine_stride)                                                                         \
    X(fui, a->fine_stride)                                                                         \
    X(taps, (size_t)a->partitions * a->block)                                                      \
    X(trial_r, (size_t)a->partitions * a->stride)                                                 \
    X(trial_i, (size_t)a->partitions * a->stride)                                                 \
    X(snap_r, (size_t)2 * a->partitions * a->stride)                                               \
    X(snap_i, (size_t)2 * a->partitions * a->stride)

void ac_aec_free(ac_aec *a)
{
    if (a == NULL)
        return;
#define FREE_ARRAY(name, count) free(a->name);
    AEC_ARRAYS(FREE_ARRAY)
#undef FREE_ARRAY
    free(a->window);
    free(a->far_active);
    ac_rfft_free(a->fft);
    ac_rfft_free(a->fine_fft);
    free(a);
}

void ac_aec_reset(ac_aec *a)
{
#define ZERO_ARRAY(name, count) memset(a->name, 0, sizeof(float) * (size_t)(count));
    AEC_ARRAYS(ZERO_ARRAY)
#undef ZERO_ARRAY
    memset(a->far_active, 0, (size_t)a->ring);
    a->fill = 0;
    /* block - 1 zeros ahead of the first block's output: with the overlap-add
     * delay of one block, that makes the latency 2 * block - 1 for every
     * sample (aec.h). */
    a->outq_len = a->block - 1;
    a->offset = 0;
    a->constrain_next = 0;
    a->pey = a->pyy = 0.0;
    a->main_power = a->shadow_power = 0.0f;
    a->found_err = a->found_mic = 0.0f;
    a->echo_found = 0;
    a->leak = LEAK_FLOOR;
    a->active_blocks = 0;
    a->lag = -1;
    a->candidate = -1;
    a->candidate_count = 0;
    a->fine_candidate = 0;
    a->fine_count = 0;
    a->fine_hold = 0;
    a->snap_block[0] = a->snap_block[1] = -1;
    a->snap_older = 0;
    a->silent_blocks = 0;
    a->onset_left = 0;
    a->refine_until = -1;
    a->snap_base = -1;
    a->blocks = 0;
}

ac_aec *ac_aec_new(int rate, int block, int partitions, int max_lag, int in_format,
                   int out_format, int suppress, int path)
{
    if (rate < 1000 || rate > 1000000 || block < 16 || block > 4096 || (block & (block - 1)) ||
        partitions < 1 || partitions > 1024 || max_lag < 0 || max_lag > 4096 ||
        (in_format != AC_FORMAT_F32 && in_format != AC_FORMAT_S16) ||
        (out_format != AC_FORMAT_F32 && out_format != AC_FORMAT_S16) || !ac_path_supported(path))
        return NULL;
    ac_aec *a = calloc(1, sizeof *a);
    if (a == NULL)
        return NULL;
    a->rate = rate;
    a->block = block;
    a->frame = 2 * block;
    a->bins = block + 1;
    a->stride = (a->bins + 15) & ~15; /* the kernels run whole vectors */
    a->partitions = partitions;
    a->max_lag = max_lag;
    a->ring = max_lag + partitions + 1;
    a->in_format = in_format;
    a->out_format = out_format;
    a->suppress = suppress != 0;
    a->path = path;
    ac_aec_pick_kernels(a);

    const float block_s = (float)block / (float)rate;
    a->leak_rate = fminf(1.0f, block_s / LEAK_TIME);
    a->mean_rate = fminf(1.0f, block_s / MEAN_TIME);
    a->compare_rate = fminf(1.0f, block_s / COMPARE_TIME);
    a->found_rate = fminf(1.0f, block_s / FOUND_TIME);
    a->residual_decay = powf(10.0f, -6.0f * block_s / RESIDUAL_DECAY_TIME);
    a->adapt_blocks = (int)ceilf(ADAPT_TIME / block_s);
    /* |X(f)|^2 of a frame of white noise is frame * power, summed over the
     * partitions. */
    a->regularisation = REGULARISATION_POWER * (float)a->frame * (float)partitions;

    ac_aec_align_setup(a); /* before the arrays: it sizes some */

    a->fft = ac_rfft_new(a->frame);
    a->fine_fft = ac_rfft_new(a->fine_frame);
    a->window = malloc(sizeof(float) * (size_t)a->frame);
    a->far_active = malloc((size_t)a->ring);
    int ok = a->fft != NULL && a->fine_fft != NULL && a->window != NULL && a->far_active != NULL;
#define ALLOC_ARRAY(name, count)                                                                   \
    a->name = malloc(sizeof(float) * (size_t)(count));                                             \
    ok = ok && a->name != NULL;
    AEC_ARRAYS(ALLOC_ARRAY)
#undef ALLOC_ARRAY
    if (!ok) {
        ac_aec_free(a);
        return NULL;
    }
    const double pi = 3.14159265358979323846;
    for (int n = 0; n < a->frame; n++)
        a->window[n] = (float)sin(pi * (n + 0.5) / a->frame);
    ac_aec_reset(a);
    return a;
}

int ac_aec_latency(const ac_aec *a)
{
    return 2 * a->block - 1;
}

int64_t ac_aec_echo_delay(const ac_aec *a)
{
    return a->lag < 0 ? -1 : (int64_t)a->lag * a->block;
}

int ac_aec_echo_found(const ac_aec *a)
{
    return a->echo_found;
}

int ac_aec_path(const ac_aec *a)
{
    return a->path;
}

int64_t ac_aec_first_nonfinite(const void *buf, int64_t n)
{
    const unsigned char *p = buf;
    for (int64_t i = 0; i < n; i++) {
        float v;
        memcpy(&v, p + 4 * i, 4);
        if (!isfinite(v))
            return i;
    }
    return -1;
}

/* ---- one block ---------------------------------------------------------- */

static float mean_square(const float *x, int n)
{
    float s = 0.0f;
    for (int i = 0; i < n; i++)
        s += x[i] * x[i];
    return s / (float)n;
}

/* Partition p back to `block` taps (its time-domain second half zeroed):
 * the unconstrained update lets circular wrap-around creep in slowly, so a
 * round robin of one partition a block is enough. */
static void constrain(ac_aec *a, float *wr, float *wi, int p)
{
    float *pr = wr + (size_t)p * a->stride, *pi = wi + (size_t)p * a->stride;
    ac_rfft_inverse(a->fft, pr, pi, a->work);
    memset(a->work + a->block, 0, sizeof(float) * (size_t)a->block);
    ac_rfft_forward(a->fft, a->work, pr, pi);
}

/* The time-domain output of spectrum (yr, yi) (its valid last block) into
 * `echo`, d - echo into `err`, and the error's spectrum (after a block of
 * zeros, so that the gradient is the linear correlation) into (er, ei).
 * Returns the error's mean square. */
static float filter_error(ac_aec *a, const float *yr, const float *yi, float *echo, float *err,
                          float *er, float *ei)
{
    const int N = a->block;
    float *w = a->work;
    ac_rfft_inverse(a->fft, yr, yi, w);
    memcpy(echo, w + N, sizeof(float) * N);
    float power = 0.0f;
    for (int n = 0; n < N; n++) {
        err[n] = a->near_in[n] - echo[n];
        power += err[n] * err[n];
    }
    memset(w, 0, sizeof(float) * N);
    memcpy(w + N, err, sizeof(float) * N);
    ac_rfft_forward(a->fft, w, er, ei);
    return power / (float)N;
}

static void run_block(ac_aec *a)
{
    const int N = a->block, B = a->bins, S = a->stride, P = a->partitions;
    const int slot = slot_of(a, 0);
    float *w = a->work;

    /* Far end: the spectrum of the last two blocks, into the ring. */
    memmove(a->far_frame, a->far_frame + N, sizeof(float) * N);
    memcpy(a->far_frame + N, a->far_in, sizeof(float) * N);
    float *xr = a->xr + (size_t)slot * S, *xi = a->xi + (size_t)slot * S;
    ac_rfft_forward(a->fft, a->far_frame, xr, xi);
    float *xp = a->xpow + (size_t)slot * S;
    for (int f = 0; f < B; f++)
        xp[f] = xr[f] * xr[f] + xi[f] * xi[f];
    a->far_active[slot] = mean_square(a->far_in, N) > ACTIVE_POWER;

    /* Near end, for the delay estimate. */
    memmove(a->near_frame, a->near_frame + N, sizeof(float) * N);
    memcpy(a->near_frame + N, a->near_in, sizeof(float) * N);
    const float near_power = mean_square(a->near_in, N);
    ac_rfft_forward(a->fft, a->near_frame, a->dr, a->di);
    ac_aec_estimate_delay(a, slot, near_power > ACTIVE_POWER);

    /* Both filters' echo estimates and errors; the update's normalisation,
     * the far end's power over the filter's window. */
    memset(a->x2, 0, sizeof(float) * S);
    for (int p = 0; p < P; p++) {
        const float *pw = a->xpow + (size_t)slot_of(a, a->offset + p) * S;
        for (int f = 0; f < S; f++)
            a->x2[f] += pw[f];
    }
    float echo[4096], err[4096];
    ac_aec_filter_output(a, a->vr, a->vi, a->yr, a->yi);
    float shadow_power = filter_error(a, a->yr, a->yi, echo, err, a->er, a->ei);
    /* The shadow adapts with a fixed step while the far end plays: fast
     * after a path change and with drift, and led astray by double talk,
     * which is why it only ever stands in for the main filter by copy. */
    if (a->far_active[slot]) {
        for (int f = 0; f < B; f++) {
            float g = SHADOW_MU / (a->x2[f] + a->regularisation);
            a->gr[f] = g * a->er[f];
            a->gi[f] = g * a->ei[f];
        }
        ac_aec_filter_update(a, a->vr, a->vi, a->gr, a->gi);
    }
    ac_aec_filter_output(a, a->wr, a->wi, a->yr, a->yi);
    float err_power = filter_error(a, a->yr, a->yi, echo, err, a->er, a->ei);
    /* Copies between the filters, judged on error powers smoothed over
     * COMPARE_TIME: the shadow clearly better (the path changed, or the main
     * filter lags): main = shadow; the shadow clearly worse (it diverged in
     * double talk): shadow = main. */
    a->main_power += a->compare_rate * (err_power - a->main_power);
    a->shadow_power += a->compare_rate * (shadow_power - a->shadow_power);
    if (a->far_active[slot] && a->shadow_power < SHADOW_WIN * a->main_power) {
        memcpy(a->wr, a->vr, sizeof(float) * (size_t)P * S);
        memcpy(a->wi, a->vi, sizeof(float) * (size_t)P * S);
        a->main_power = a->shadow_power;
        ac_aec_filter_output(a, a->wr, a->wi, a->yr, a->yi);
        err_power = filter_error(a, a->yr, a->yi, echo, err, a->er, a->ei);
    } else if (a->shadow_power > SHADOW_LOSE * a->main_power) {
        memcpy(a->vr, a->wr, sizeof(float) * (size_t)P * S);
        memcpy(a->vi, a->wi, sizeof(float) * (size_t)P * S);
        a->shadow_power = a->main_power;
    }
    /* Whether there is an echo to cancel at all (ECHO_FOUND). */
    if (a->far_active[slot]) {
        a->found_err += a->found_rate * (err_power - a->found_err);
        a->found_mic += a->found_rate * (near_power - a->found_mic);
        if (a->found_err < ECHO_FOUND * a->found_mic)
            a->echo_found = 1;
    }
    if (a->lag >= 0)
        a->echo_found = 1;

    /* The echo path moved by up to 24 ms (32 at 24 and 48 kHz): both
     * filters follow at once (the first answer's filter, still learning, is left alone). */
    ac_aec_fine_feed(a, echo);
    if (a->far_active[slot] && a->active_blocks >= a->adapt_blocks)
        ac_aec_fine_align(a);

    /* A filter worse than none (just after the path changed): the suppressor
     * works on the microphone instead. */
    const float *clean = err_power > near_power ? a->near_in : err;

    /* Windowed spectra of the output candidate and of the echo estimate. */
    for (int n = 0; n < N; n++) {
        w[n] = a->err_prev[n] * a->window[n];
        w[n + N] = clean[n] * a->window[n + N];
    }
    ac_rfft_forward(a->fft, w, a->ewr, a->ewi);
    for (int n = 0; n < N; n++) {
        w[n] = a->echo_prev[n] * a->window[n];
        w[n + N] = echo[n] * a->window[n + N];
    }
    ac_rfft_forward(a->fft, w, a->ywr, a->ywi);
    memcpy(a->err_prev, clean, sizeof(float) * N);
    memcpy(a->echo_prev, echo, sizeof(float) * N);

    /* Leakage: the regression of the error's power on the echo estimate's,
     * bin by bin around their means, says what share of the estimate is
     * still left in the error (residual echo).  It follows fast while the
     * error is mostly echo, slowly when the error holds more (near-end
     * speech), so double talk does not read as leakage. */
    double pey = 0.0, pyy = 0.0, e_sum = 0.0, y_sum = 0.0;
    for (int f = 0; f < B; f++) {
        float e2 = a->ewr[f] * a->ewr[f] + a->ewi[f] * a->ewi[f];
        float y2 = a->ywr[f] * a->ywr[f] + a->ywi[f] * a->ywi[f];
        float de = e2 - a->mean_e[f], dy = y2 - a->mean_y[f];
        pey += (double)de * dy;
        pyy += (double)dy * dy;
        e_sum += e2;
        y_sum += y2;
        a->mean_e[f] += a->mean_rate * de;
        a->mean_y[f] += a->mean_rate * dy;
    }
    const int far_active = a->far_active[slot];
    if (far_active && y_sum > 0.0) {
        double rate = a->leak_rate * (y_sum < e_sum ? y_sum / e_sum : 1.0);
        a->pey += rate * (pey - a->pey);
        a->pyy += rate * (pyy - a->pyy);
        if (a->pyy > 0.0) {
            double leak = a->pey / a->pyy;
            a->leak = (float)(leak < LEAK_FLOOR ? LEAK_FLOOR : leak > 1.0 ? 1.0 : leak);
        }
    }
    if (far_active)
        a->active_blocks++;
    const int adapted = a->active_blocks >= a->adapt_blocks;

    /* Step per bin: the residual echo's share of the error (Valin's optimal
     * step), or a fixed start while the filter has learnt nothing yet. */
    for (int f = 0; f < B; f++) {
        float mu;
        if (adapted) {
            float e2 = a->ewr[f] * a->ewr[f] + a->ewi[f] * a->ewi[f];
            float y2 = a->ywr[f] * a->ywr[f] + a->ywi[f] * a->ywi[f];
            mu = LEAK_STEP_GAIN * a->leak * y2 / (e2 + 1e-12f);
            mu = mu > MU_MAX ? MU_MAX : mu;
        } else {
            mu = far_active ? MU_START : 0.0f;
        }
        float g = mu / (a->x2[f] + a->regularisation);
        a->gr[f] = g * a->er[f];
        a->gi[f] = g * a->ei[f];
    }
    ac_aec_filter_update(a, a->wr, a->wi, a->gr, a->gi);
    constrain(a, a->wr, a->wi, a->constrain_next);
    constrain(a, a->vr, a->vi, a->constrain_next);
    a->constrain_next = (a->constrain_next + 1) % P;

    /* Residual echo suppression.  Per bin, a gain that subtracts
     * OVERSUBTRACT times the residual estimate, held with a reverberant
     * decay, from the error.  The estimate is the leakage (read high as for
     * the step) times the echo estimate, all of the echo estimate when the
     * microphone itself is being passed on, plus NONLINEAR_SHARE of the echo
     * estimate's mean over the bins (distortion).  Then, while the far end
     * plays, the share of the error that the gains keep says whether anyone
     * talks at the near end: below NEAR_SHARE the frame is taken for echo
     * and noise alone and lowered as a whole (by the cube of the ratio),
     * which is where most of the echo removed in far single talk comes
     * from; in double talk the near end keeps its share. */
    if (a->suppress) {
        const float scale = clean == a->near_in || !adapted ? 1.0f : fminf(1.0f, LEAK_STEP_GAIN * a->leak);
        double kept = 0.0, total = 0.0, echo_sum = 0.0;
        for (int f = 0; f < B; f++)
            echo_sum += a->ywr[f] * a->ywr[f] + a->ywi[f] * a->ywi[f];
        const float spread = NONLINEAR_SHARE * (float)(echo_sum / B);
        for (int f = 0; f < B; f++) {
            float e2 = a->ewr[f] * a->ewr[f] + a->ewi[f] * a->ewi[f];
            float y2 = a->ywr[f] * a->ywr[f] + a->ywi[f] * a->ywi[f];
            float r = scale * y2 + spread;
            float held = a->residual[f] * a->residual_decay;
            a->residual[f] = r > held ? r : held;
            float gain = 1.0f - OVERSUBTRACT * a->residual[f] / (e2 + 1e-20f);
            gain = gain < GAIN_FLOOR ? GAIN_FLOOR : gain;
            a->gain[f] = gain;
            kept += (double)gain * gain * e2;
            total += e2;
        }
        float share = total > 0.0 ? (float)(kept / total) : 1.0f;
        float all = 1.0f;
        if (far_active && share < NEAR_SHARE)
            all = fmaxf(GAIN_FLOOR, powf(share / NEAR_SHARE, 3.0f));
        for (int f = 0; f < B; f++) {
            float gain = a->gain[f] * all;
            gain = gain < GAIN_FLOOR ? GAIN_FLOOR : gain;
            a->ewr[f] *= gain;
            a->ewi[f] *= gain;
        }
    }
    if (a->echo_found) {
        ac_rfft_inverse(a->fft, a->ewr, a->ewi, w);
    } else {
        /* No echo found yet: the microphone, through the same windows (all
         * above still runs, so the state is what it would have been). */
        for (int n = 0; n < 2 * N; n++)
            w[n] = a->near_frame[n] * a->window[n];
    }
    float *out = a->outq + a->outq_len;
    for (int n = 0; n < N; n++) {
        out[n] = a->ola[n] + w[n] * a->window[n];
        a->ola[n] = w[n + N] * a->window[n + N];
    }
    a->outq_len += N;
    a->blocks++;
}

/* ---- streaming ---------------------------------------------------------- */

static void load(const ac_aec *a, const unsigned char *src, int64_t n, float *dst)
{
    if (a->in_format == AC_FORMAT_S16) {
        for (int64_t i = 0; i < n; i++)
            dst[i] = ac_f32_from_pcm16(ac_load_s16le(src + 2 * i));
    } else {
        memcpy(dst, src, sizeof(float) * (size_t)n);
    }
}

static void store(const ac_aec *a, const float *src, int64_t n, unsigned char *dst)
{
    if (a->out_format == AC_FORMAT_S16) {
        for (int64_t i = 0; i < n; i++)
            ac_store_s16le(dst + 2 * i, ac_pcm16_from_f32(src[i]));
    } else {
        memcpy(dst, src, sizeof(float) * (size_t)n);
    }
}

void ac_aec_process(ac_aec *a, const void *far, const void *near, int64_t n, void *out)
{
    const unsigned char *f = far, *d = near;
    unsigned char *o = out;
    const size_t in_size = a->in_format == AC_FORMAT_S16 ? 2 : 4;
    const size_t out_size = a->out_format == AC_FORMAT_S16 ? 2 : 4;
    /* Invariant between segments: outq_len + fill == block - 1, so a
     * segment that does not finish a block finds its output queued, and one
     * that does finds it after the block. */
    while (n > 0) {
        int m = (int)(n < a->block - a->fill ? n : a->block - a->fill);
        load(a, f, m, a->far_in + a->fill);
        load(a, d, m, a->near_in + a->fill);
        a->fill += m;
        if (a->fill == a->block) {
            run_block(a);
            a->fill = 0;
        }
        store(a, a->outq, m, o);
        a->outq_len -= m;
        memmove(a->outq, a->outq + m, sizeof(float) * (size_t)a->outq_len);
        f += (size_t)m * in_size;
        d += (size_t)m * in_size;
        o += (size_t)m * out_size;
        n -= m;
    }
}
