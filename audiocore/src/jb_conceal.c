#include "jb_conceal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pcm.h"

/* Correlation a lag must reach before a cross-fade over it is inaudible
 * enough to time-scale voiced audio; below it we only touch near-silence. */
#define TIMESCALE_MIN_CORR 0.6f
#define CONCEAL_MIN_CORR 0.5f
/* A sum of squares per sample below this (int16 units) is near-silence:
 * about -54 dBFS. */
#define QUIET_POWER (64.0f * 64.0f)

/* Rounds and saturates an int16-domain value.  This is arithmetic on
 * samples that are already PCM16, not the f32 <-> s16 policy of pcm.h. */
static inline int16_t sat16(float v)
{
    v = v > 32767.0f ? 32767.0f : (v < -32768.0f ? -32768.0f : v);
    return (int16_t)lrintf(v);
}

int ac_conceal_init(ac_conceal *c, int rate, int channels, int frame)
{
    memset(c, 0, sizeof *c);
    c->ch = channels;
    c->frame = frame;
    /* Lags cover pitch from 400 Hz down; a time-scaling lag must fit twice
     * into a frame, a concealment period may be longer (15 ms). */
    c->maxlag = (int)min64(rate / 100, frame / 2);
    c->minlag = (int)min64(rate / 400, c->maxlag / 2);
    c->conceal_maxlag = (int)max64(c->maxlag, rate * 15 / 1000);
    c->step = (int)max64(1, rate / 8000); /* coarse lag search at ~8 kHz */
    c->hist_len = 2 * c->conceal_maxlag + 2;
    c->hold = rate / 100;   /* 10 ms at full level, */
    c->decay = rate / 20;   /* then a 50 ms fade to silence */
    c->smooth = rate / 400; /* 2.5 ms joins */
    c->merge_len = max64(1, c->smooth);
    c->end_fade = max64(1, rate / 200);
    c->acc_on = c->exp_on = -1;
    int64_t analysis = max64(c->hist_len, (int64_t)frame + 2 * c->maxlag);
    c->history = calloc((size_t)(c->hist_len * c->ch), sizeof(float));
    c->period = calloc((size_t)(c->conceal_maxlag * c->ch), sizeof(float));
    c->offset = calloc((size_t)c->ch, sizeof(float));
    c->work = malloc((size_t)analysis * sizeof(float));
    c->frames = malloc((size_t)(analysis * c->ch) * sizeof(float));
    c->tmp = malloc((size_t)(analysis * c->ch) * sizeof(int16_t));
    return c->history && c->period && c->offset && c->work && c->frames && c->tmp ? 0 : -1;
}

void ac_conceal_free(ac_conceal *c)
{
    free(c->history);
    free(c->period);
    free(c->offset);
    free(c->work);
    free(c->frames);
    free(c->tmp);
}

/* ---- lag search ------------------------------------------------------- */

static float norm_corr(const float *a, const float *b, int n, int step)
{
    float ab = 0, aa = 0, bb = 0;
    for (int k = 0; k < n; k += step) {
        ab += a[k] * b[k];
        aa += a[k] * a[k];
        bb += b[k] * b[k];
    }
    return (aa > 0 && bb > 0) ? ab / sqrtf(aa * bb) : 0.0f;
}

/* The lag L in [minlag, maxlag] whose two adjacent segments of length L
 * (x[0, L) and x[L, 2L), or the last two of x when at_end) correlate
 * best; coarse at ~8 kHz, then refined. */
static int best_lag(const ac_conceal *c, const float *x, int n, int maxlag, int at_end,
                    float *corr)
{
    int step = c->step, best = maxlag;
    float bestc = -2.0f;
    maxlag = (int)min64(maxlag, n / 2);
    for (int pass = 0; pass < 2; pass++) {
        int lo = pass ? (int)max64(c->minlag, best - step) : c->minlag;
        int hi = pass ? (int)min64(maxlag, best + step) : maxlag;
        int inc = pass ? 1 : step;
        for (int L = lo; L <= hi; L += inc) {
            const float *a = at_end ? x + n - 2 * L : x;
            float r = norm_corr(a, a + L, L, pass ? 1 : step);
            if (r > bestc) {
                bestc = r;
                best = L;
            }
        }
    }
    *corr = bestc;
    return best;
}

static float mean_power(const float *x, int n)
{
    float s = 0;
    for (int k = 0; k < n; k++)
        s += x[k] * x[k];
    return n ? s / (float)n : 0.0f;
}

/* Loads n sample frames as float, interleaved, plus a mono mix. */
static void load_analysis(ac_conceal *c, const int16_t *src, int64_t n)
{
    for (int64_t k = 0; k < n; k++) {
        float m = 0;
        for (int ch = 0; ch < c->ch; ch++) {
            float v = src[k * c->ch + ch];
            c->frames[k * c->ch + ch] = v;
            m += v;
        }
        c->work[k] = m / (float)c->ch;
    }
}

/* ---- concealment ------------------------------------------------------ */

void ac_conceal_history(ac_conceal *c, const int16_t *x, int64_t n)
{
    int ch = c->ch;
    int64_t H = c->hist_len;
    if (n >= H) {
        x += (n - H) * ch;
        n = H;
    } else {
        memmove(c->history, c->history + n * ch, (size_t)((H - n) * ch) * sizeof(float));
    }
    for (int64_t k = 0; k < n * ch; k++)
        c->history[(H - n) * ch + k] = x[k];
}

/* Picks the period to repeat from the history plus the first `ncur`
 * samples of the frame being built. */
static void start(ac_conceal *c, const int16_t *cur, int64_t ncur)
{
    int ch = c->ch;
    int64_t H = c->hist_len;
    float *x = c->frames;
    int64_t keep = H - min64(ncur, H);
    memcpy(x, c->history + (H - keep) * ch, (size_t)(keep * ch) * sizeof(float));
    for (int64_t k = 0; k < (H - keep) * ch; k++)
        x[keep * ch + k] = cur[(ncur - (H - keep)) * ch + k];
    for (int64_t k = 0; k < H; k++) {
        float m = 0;
        for (int i = 0; i < ch; i++)
            m += x[k * ch + i];
        c->work[k] = m / (float)ch;
    }
    float corr;
    int L = best_lag(c, c->work, (int)H - 1, c->conceal_maxlag, 1, &corr);
    /* Not periodic: repeat the longest waveform we may, which buzzes less. */
    if (corr < CONCEAL_MIN_CORR)
        L = c->conceal_maxlag;
    for (int64_t k = 0; k < (int64_t)L * ch; k++)
        c->period[k] = x[(H - L) * ch + k];
    /* Starting the repetition one period back would jump by the change
     * over that period; spread that step over a short ramp instead. */
    c->period_silent = 1;
    for (int64_t k = 0; k < (int64_t)L * ch; k++)
        c->period_silent &= c->period[k] == 0.0f;
    for (int i = 0; i < ch; i++) {
        c->offset[i] = x[(H - 1) * ch + i] - x[(H - L - 1) * ch + i];
        c->period_silent &= c->offset[i] == 0.0f;
    }
    c->lag = L;
    c->phase = 0;
    c->n = 0;
    c->active = 1;
}

/* One concealment sample frame into dst (float, interleaved); returns its gain. */
static float next(ac_conceal *c, float *dst)
{
    int64_t n = c->n++;
    float g = n < c->hold ? 1.0f : 1.0f - (float)(n - c->hold) / (float)c->decay;
    if (g < 0)
        g = 0;
    float ramp = n < c->smooth ? 1.0f - (float)n / (float)c->smooth : 0.0f;
    for (int i = 0; i < c->ch; i++)
        dst[i] = g * (c->period[c->phase * c->ch + i] + ramp * c->offset[i]);
    c->phase = (c->phase + 1) % c->lag;
    return g;
}

void ac_conceal_fill(ac_conceal *c, int16_t *out, int64_t *pos, int64_t n0, int64_t n,
                     ac_jb_stats *st)
{
    float v[AC_MAX_CHANNELS];
    if (!c->active) {
        start(c, out, n0);
        st->concealment_events++;
    }
    for (int64_t k = n0; k < n0 + n; k++) {
        float g = next(c, v);
        for (int i = 0; i < c->ch; i++)
            out[k * c->ch + i] = sat16(v[i]);
        pos[k] = -1;
        if (g == 0.0f || c->period_silent)
            st->silent_concealed++;
    }
    st->concealed += n;
}

/* Fades the concealment (continuing the last output) to silence; returns
 * how many sample frames were written. */
static int64_t fade_out(ac_conceal *c, int16_t *out, int64_t *pos, int64_t n0, int64_t n,
                        ac_jb_stats *st)
{
    float v[AC_MAX_CHANNELS];
    int64_t k = n0;
    for (; k < n0 + n && c->fade_left > 0; k++) {
        float f = (float)c->fade_left-- / (float)(c->fade_len + 1);
        next(c, v);
        for (int i = 0; i < c->ch; i++)
            out[k * c->ch + i] = sat16(f * v[i]);
        pos[k] = -1;
    }
    if (c->fade_left == 0)
        c->active = 0;
    st->idle += k - n0;
    return k - n0;
}

void ac_conceal_merge(ac_conceal *c, const ac_ring *src, int16_t *out, int64_t *pos, int64_t n0,
                      int64_t m, ac_jb_stats *st)
{
    float v[AC_MAX_CHANNELS];
    int16_t *x = c->tmp;
    ac_ring_get(src, src->read, m, x);
    for (int64_t k = 0; k < m; k++) {
        float w = (float)(k + 1) / (float)(m + 1);
        next(c, v);
        for (int i = 0; i < c->ch; i++)
            out[(n0 + k) * c->ch + i] = sat16((1 - w) * v[i] + w * x[k * c->ch + i]);
        pos[n0 + k] = -(src->read + k) - 2;
    }
    c->active = 0;
    st->blended += m;
}

void ac_conceal_flush(ac_conceal *c, int64_t fade, int was_active)
{
    was_active = was_active || c->active || c->fade_left > 0;
    c->fade_pending = was_active && fade > 0;
    c->fade_len = fade;
    c->fade_left = 0;
    if (!c->fade_pending)
        c->active = 0;
}

int64_t ac_conceal_flush_fade(ac_conceal *c, int16_t *out, int64_t *pos, ac_jb_stats *st)
{
    if (c->fade_pending) {
        c->fade_pending = 0;
        if (!c->active)
            start(c, out, 0);
        c->fade_left = c->fade_len;
    }
    return c->fade_left > 0 ? fade_out(c, out, pos, 0, c->frame, st) : 0;
}

int64_t ac_conceal_end(ac_conceal *c, int16_t *out, int64_t *pos, int64_t n0, int64_t room,
                       ac_jb_stats *st)
{
    if (!c->active)
        return 0;
    c->fade_len = c->fade_left = c->end_fade;
    return fade_out(c, out, pos, n0, room, st);
}

int ac_conceal_fading(const ac_conceal *c)
{
    return c->fade_pending || c->fade_left > 0;
}

/* ---- time-scaling ----------------------------------------------------- */

void ac_stretch_set(ac_conceal *c, int64_t acc_on, int64_t acc_off, int64_t exp_on,
                    int64_t exp_off)
{
    c->acc_on = acc_on;
    c->acc_off = acc_off;
    c->exp_on = exp_on;
    c->exp_off = exp_off;
}

void ac_stretch_reset(ac_conceal *c)
{
    c->level_init = 0;
    c->accelerating = c->expanding = 0;
}

void ac_stretch_observe(ac_conceal *c, int64_t level)
{
    if (!c->level_init) {
        c->level_avg = (double)level;
        c->level_init = 1;
    } else {
        /* ~8-frame smoothing: reacts within a packet burst, ignores one. */
        c->level_avg += ((double)level - c->level_avg) * 0.125;
    }
    if (c->acc_on >= 0) {
        if (c->level_avg > (double)c->acc_on)
            c->accelerating = 1;
        else if (c->level_avg <= (double)c->acc_off)
            c->accelerating = 0;
    }
    if (c->exp_on >= 0) {
        if (c->level_avg < (double)c->exp_on)
            c->expanding = 1;
        else if (c->level_avg >= (double)c->exp_off)
            c->expanding = 0;
    }
}

static int pick_lag(ac_conceal *c, int64_t n, int *lag)
{
    float corr;
    int L = best_lag(c, c->work, (int)n, c->maxlag, 0, &corr);
    if (corr >= TIMESCALE_MIN_CORR) {
        *lag = L;
        return 1;
    }
    if (mean_power(c->work, 2 * c->maxlag) < QUIET_POWER) {
        *lag = c->maxlag;
        return 1;
    }
    return 0;
}

/* Plays frame + L source samples in one frame: the first period is
 * cross-faded with the next. */
static int64_t accelerate(ac_conceal *c, const ac_ring *src, int16_t *out, int64_t *pos,
                          ac_jb_stats *st)
{
    int F = c->frame, ch = c->ch, L;
    int64_t n = F + c->maxlag;
    ac_ring_get(src, src->read, n, c->tmp);
    load_analysis(c, c->tmp, n);
    if (!pick_lag(c, n, &L))
        return 0;
    const int16_t *x = c->tmp;
    for (int k = 0; k < L; k++) {
        float w = (float)(k + 1) / (float)(L + 1);
        for (int i = 0; i < ch; i++)
            out[k * ch + i] = sat16((1 - w) * x[k * ch + i] + w * x[(k + L) * ch + i]);
        pos[k] = -1;
    }
    memcpy(out + L * ch, x + 2 * L * ch, (size_t)((F - L) * ch) * sizeof(int16_t));
    for (int k = L; k < F; k++)
        pos[k] = src->read + k + L;
    st->removed += L;
    st->blended += L;
    st->played += F - L;
    st->accelerations++;
    c->level_avg -= L;
    return F + L;
}

/* Plays frame - L source samples in one frame: one period is repeated,
 * cross-faded into its copy. */
static int64_t expand(ac_conceal *c, const ac_ring *src, int16_t *out, int64_t *pos,
                      ac_jb_stats *st)
{
    int F = c->frame, ch = c->ch, L;
    int64_t n = max64(F, 2 * c->maxlag);
    ac_ring_get(src, src->read, n, c->tmp);
    load_analysis(c, c->tmp, n);
    if (!pick_lag(c, 2 * c->maxlag, &L))
        return 0;
    const int16_t *x = c->tmp;
    memcpy(out, x, (size_t)(L * ch) * sizeof(int16_t));
    for (int k = 0; k < L; k++) {
        float w = (float)(k + 1) / (float)(L + 1);
        pos[k] = src->read + k;
        for (int i = 0; i < ch; i++)
            out[(L + k) * ch + i] = sat16((1 - w) * x[(L + k) * ch + i] + w * x[k * ch + i]);
        pos[L + k] = -1;
    }
    memcpy(out + 2 * L * ch, x + L * ch, (size_t)((F - 2 * L) * ch) * sizeof(int16_t));
    for (int k = 2 * L; k < F; k++)
        pos[k] = src->read + k - L;
    st->inserted += L;
    st->blended += L;
    st->played += F - L;
    st->expansions++;
    c->level_avg += L;
    return F - L;
}

int64_t ac_stretch_frame(ac_conceal *c, const ac_ring *src, int64_t len, int16_t *out,
                         int64_t *pos, ac_jb_stats *st)
{
    int64_t used = 0;
    if (c->accelerating && len >= c->frame + c->maxlag)
        used = accelerate(c, src, out, pos, st);
    if (!used && c->expanding && len >= max64(c->frame, 2 * c->maxlag))
        used = expand(c, src, out, pos, st);
    return used;
}
