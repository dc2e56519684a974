#include "jitter.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pcm.h"

/* Received-audio runs in TIMELINE mode: 20 ms packets in a 10 s buffer with
 * every other one lost need 250; more than this is refused, not corrupted. */
#define MAX_SPANS 512
#define MAX_BOUNDS 64
#define SEQ_WINDOW 1024 /* sequence numbers remembered for duplicate detection */
#define DELAY_WINDOW 512
#define DELAY_WINDOW_S 2.0 /* relative delay is measured against the fastest packet this recent */
#define DELAY_BIN_MS 1.0
/* Correlation a lag must reach before a cross-fade over it is inaudible
 * enough to time-scale voiced audio; below it we only touch near-silence. */
#define TIMESCALE_MIN_CORR 0.6f
#define CONCEAL_MIN_CORR 0.5f
/* A sum of squares per sample below this (int16 units) is near-silence:
 * about -54 dBFS. */
#define QUIET_POWER (64.0f * 64.0f)

typedef struct span {
    int64_t start, end;
} span;

struct ac_jb {
    ac_jb_config cfg;
    int ch, frame;
    int16_t *ring;
    int64_t cap;
    int64_t read; /* next source position to play */
    int64_t end;  /* one past the newest stored sample */
    int anchored; /* TIMELINE: read/end mean something */
    int playing;
    span spans[MAX_SPANS]; /* TIMELINE: stored runs, sorted, disjoint, non-adjacent */
    int nspans;
    int64_t bounds[MAX_BOUNDS]; /* ends of finished turns, oldest first */
    int bhead, nbounds;
    /* TIMELINE sequence and timestamp unwrapping */
    int have_seq, have_ts;
    int64_t seq_hi, ts_hi;
    uint64_t seen[SEQ_WINDOW / 64];
    int64_t debt; /* samples concealed while stalled, owed back by skipping a hole */
    /* time-scaling */
    double level_avg;
    int level_init;
    int64_t acc_on, acc_off, exp_on, exp_off;
    int accelerating, expanding;
    int minlag, maxlag, conceal_maxlag, step;
    /* adaptive target (TIMELINE) */
    double quantile, forget;
    int64_t min_level, max_level, target;
    double *delay_hist;
    int nbins;
    double packets_seen;
    double win_arrival[DELAY_WINDOW], win_delay[DELAY_WINDOW];
    int win_head, win_n;
    /* concealment: a period of the last output, repeated with a fade */
    float *history; /* last hist_len sample frames emitted */
    int hist_len;
    float *period;
    float *offset; /* per channel: step between the last sample and the period's start */
    int lag, phase, conceal_active, period_silent;
    int64_t conceal_n, hold, decay, smooth;
    int fade_pending;
    int64_t fade_len, fade_left, end_fade;
    int64_t merge_len;
    float *work;   /* mono analysis */
    float *frames; /* analysis copy, interleaved */
    int16_t *tmp;
    int64_t *posbuf;
    ac_jb_stats st;
};

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* Rounds and saturates an int16-domain value.  This is arithmetic on
 * samples that are already PCM16, not the f32 <-> s16 policy of pcm.h. */
static inline int16_t sat16(float v)
{
    v = v > 32767.0f ? 32767.0f : (v < -32768.0f ? -32768.0f : v);
    return (int16_t)lrintf(v);
}

static void ring_get(const ac_jb *jb, int64_t pos, int64_t n, int16_t *dst)
{
    int64_t i = pos % jb->cap, first = min64(n, jb->cap - i);
    memcpy(dst, jb->ring + i * jb->ch, (size_t)(first * jb->ch) * sizeof(int16_t));
    if (n > first)
        memcpy(dst + first * jb->ch, jb->ring, (size_t)((n - first) * jb->ch) * sizeof(int16_t));
}

static void ring_put(ac_jb *jb, int64_t pos, const int16_t *src, int64_t n)
{
    int64_t i = pos % jb->cap, first = min64(n, jb->cap - i);
    memcpy(jb->ring + i * jb->ch, src, (size_t)(first * jb->ch) * sizeof(int16_t));
    if (n > first)
        memcpy(jb->ring, src + first * jb->ch, (size_t)((n - first) * jb->ch) * sizeof(int16_t));
}

ac_jb *ac_jb_new(const ac_jb_config *cfg)
{
    if (cfg->rate < 1000 || cfg->channels < 1 || cfg->channels > AC_MAX_CHANNELS || cfg->frame < 8 ||
        cfg->capacity < 4 * (int64_t)cfg->frame || cfg->start_level < 0 || cfg->resume_level < 0 ||
        (cfg->mode != AC_JB_STREAM && cfg->mode != AC_JB_TIMELINE))
        return NULL;
    ac_jb *jb = calloc(1, sizeof(*jb));
    if (!jb)
        return NULL;
    jb->cfg = *cfg;
    jb->ch = cfg->channels;
    jb->frame = cfg->frame;
    jb->cap = cfg->capacity;
    /* Lags cover pitch from 400 Hz down; a time-scaling lag must fit twice
     * into a frame, a concealment period may be longer (15 ms). */
    jb->maxlag = (int)min64(cfg->rate / 100, cfg->frame / 2);
    jb->minlag = (int)min64(cfg->rate / 400, jb->maxlag / 2);
    jb->conceal_maxlag = (int)max64(jb->maxlag, cfg->rate * 15 / 1000);
    jb->step = (int)max64(1, cfg->rate / 8000); /* coarse lag search at ~8 kHz */
    jb->hist_len = 2 * jb->conceal_maxlag + 2;
    jb->hold = cfg->rate / 100;      /* 10 ms at full level, */
    jb->decay = cfg->rate / 20;      /* then a 50 ms fade to silence */
    jb->smooth = cfg->rate / 400;    /* 2.5 ms joins */
    jb->merge_len = max64(1, jb->smooth);
    jb->end_fade = max64(1, cfg->rate / 200);
    jb->acc_on = jb->exp_on = -1;
    jb->quantile = 0.0;
    jb->target = cfg->start_level;
    int64_t analysis = max64(jb->hist_len, (int64_t)cfg->frame + 2 * jb->maxlag);
    jb->nbins = 2048;
    jb->ring = malloc((size_t)(jb->cap * jb->ch) * sizeof(int16_t));
    jb->history = calloc((size_t)(jb->hist_len * jb->ch), sizeof(float));
    jb->period = calloc((size_t)(jb->conceal_maxlag * jb->ch), sizeof(float));
    jb->offset = calloc((size_t)jb->ch, sizeof(float));
    jb->work = malloc((size_t)analysis * sizeof(float));
    jb->frames = malloc((size_t)(analysis * jb->ch) * sizeof(float));
    jb->tmp = malloc((size_t)(analysis * jb->ch) * sizeof(int16_t));
    jb->posbuf = malloc((size_t)cfg->frame * sizeof(int64_t));
    jb->delay_hist = calloc((size_t)jb->nbins, sizeof(double));
    if (!jb->ring || !jb->history || !jb->period || !jb->offset || !jb->work || !jb->frames ||
        !jb->tmp || !jb->posbuf || !jb->delay_hist) {
        ac_jb_free(jb);
        return NULL;
    }
    return jb;
}

void ac_jb_free(ac_jb *jb)
{
    if (!jb)
        return;
    free(jb->ring);
    free(jb->history);
    free(jb->period);
    free(jb->offset);
    free(jb->work);
    free(jb->frames);
    free(jb->tmp);
    free(jb->posbuf);
    free(jb->delay_hist);
    free(jb);
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
static int best_lag(const ac_jb *jb, const float *x, int n, int maxlag, int at_end, float *corr)
{
    int step = jb->step, best = maxlag;
    float bestc = -2.0f;
    maxlag = (int)min64(maxlag, n / 2);
    for (int pass = 0; pass < 2; pass++) {
        int lo = pass ? (int)max64(jb->minlag, best - step) : jb->minlag;
        int hi = pass ? (int)min64(maxlag, best + step) : maxlag;
        int inc = pass ? 1 : step;
        for (int L = lo; L <= hi; L += inc) {
            const float *a = at_end ? x + n - 2 * L : x;
            float c = norm_corr(a, a + L, L, pass ? 1 : step);
            if (c > bestc) {
                bestc = c;
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
static void load_analysis(ac_jb *jb, const int16_t *src, int64_t n)
{
    for (int64_t k = 0; k < n; k++) {
        float m = 0;
        for (int c = 0; c < jb->ch; c++) {
            float v = src[k * jb->ch + c];
            jb->frames[k * jb->ch + c] = v;
            m += v;
        }
        jb->work[k] = m / (float)jb->ch;
    }
}

/* ---- concealment ------------------------------------------------------ */

static void history_append(ac_jb *jb, const int16_t *x, int64_t n)
{
    int ch = jb->ch;
    int64_t H = jb->hist_len;
    if (n >= H) {
        x += (n - H) * ch;
        n = H;
    } else {
        memmove(jb->history, jb->history + n * ch, (size_t)((H - n) * ch) * sizeof(float));
    }
    for (int64_t k = 0; k < n * ch; k++)
        jb->history[(H - n) * ch + k] = x[k];
}

/* Picks the period to repeat from the history plus the first `ncur`
 * samples of the frame being built. */
static void start_conceal(ac_jb *jb, const int16_t *cur, int64_t ncur)
{
    int ch = jb->ch;
    int64_t H = jb->hist_len;
    float *x = jb->frames;
    int64_t keep = H - min64(ncur, H);
    memcpy(x, jb->history + (H - keep) * ch, (size_t)(keep * ch) * sizeof(float));
    for (int64_t k = 0; k < (H - keep) * ch; k++)
        x[keep * ch + k] = cur[(ncur - (H - keep)) * ch + k];
    for (int64_t k = 0; k < H; k++) {
        float m = 0;
        for (int c = 0; c < ch; c++)
            m += x[k * ch + c];
        jb->work[k] = m / (float)ch;
    }
    float corr;
    int L = best_lag(jb, jb->work, (int)H - 1, jb->conceal_maxlag, 1, &corr);
    /* Not periodic: repeat the longest waveform we may, which buzzes less. */
    if (corr < CONCEAL_MIN_CORR)
        L = jb->conceal_maxlag;
    for (int64_t k = 0; k < (int64_t)L * ch; k++)
        jb->period[k] = x[(H - L) * ch + k];
    /* Starting the repetition one period back would jump by the change
     * over that period; spread that step over a short ramp instead. */
    jb->period_silent = 1;
    for (int64_t k = 0; k < (int64_t)L * ch; k++)
        jb->period_silent &= jb->period[k] == 0.0f;
    for (int c = 0; c < ch; c++) {
        jb->offset[c] = x[(H - 1) * ch + c] - x[(H - L - 1) * ch + c];
        jb->period_silent &= jb->offset[c] == 0.0f;
    }
    jb->lag = L;
    jb->phase = 0;
    jb->conceal_n = 0;
    jb->conceal_active = 1;
}

/* One concealment sample frame into dst (float, interleaved); returns its gain. */
static float conceal_next(ac_jb *jb, float *dst)
{
    int64_t n = jb->conceal_n++;
    float g = n < jb->hold ? 1.0f : 1.0f - (float)(n - jb->hold) / (float)jb->decay;
    if (g < 0)
        g = 0;
    float ramp = n < jb->smooth ? 1.0f - (float)n / (float)jb->smooth : 0.0f;
    for (int c = 0; c < jb->ch; c++)
        dst[c] = g * (jb->period[jb->phase * jb->ch + c] + ramp * jb->offset[c]);
    jb->phase = (jb->phase + 1) % jb->lag;
    return g;
}

static void conceal(ac_jb *jb, int16_t *out, int64_t *pos, int64_t n0, int64_t n)
{
    float v[AC_MAX_CHANNELS];
    if (!jb->conceal_active) {
        start_conceal(jb, out, n0);
        jb->st.concealment_events++;
    }
    for (int64_t k = n0; k < n0 + n; k++) {
        float g = conceal_next(jb, v);
        for (int c = 0; c < jb->ch; c++)
            out[k * jb->ch + c] = sat16(v[c]);
        pos[k] = -1;
        if (g == 0.0f || jb->period_silent)
            jb->st.silent_concealed++;
    }
    jb->st.concealed += n;
}

/* Fades the concealment (continuing the last output) to silence; returns
 * how many sample frames were written. */
static int64_t fade_out(ac_jb *jb, int16_t *out, int64_t *pos, int64_t n0, int64_t n)
{
    float v[AC_MAX_CHANNELS];
    int64_t k = n0;
    for (; k < n0 + n && jb->fade_left > 0; k++) {
        float f = (float)jb->fade_left-- / (float)(jb->fade_len + 1);
        conceal_next(jb, v);
        for (int c = 0; c < jb->ch; c++)
            out[k * jb->ch + c] = sat16(f * v[c]);
        pos[k] = -1;
    }
    if (jb->fade_left == 0)
        jb->conceal_active = 0;
    jb->st.idle += k - n0;
    return k - n0;
}

/* Cross-fades from the running concealment into source audio at read. */
static void merge(ac_jb *jb, int16_t *out, int64_t *pos, int64_t n0, int64_t m)
{
    float v[AC_MAX_CHANNELS];
    int16_t *x = jb->tmp;
    ring_get(jb, jb->read, m, x);
    for (int64_t k = 0; k < m; k++) {
        float w = (float)(k + 1) / (float)(m + 1);
        conceal_next(jb, v);
        for (int c = 0; c < jb->ch; c++)
            out[(n0 + k) * jb->ch + c] = sat16((1 - w) * v[c] + w * x[k * jb->ch + c]);
        pos[n0 + k] = -(jb->read + k) - 2;
    }
    jb->conceal_active = 0;
    jb->st.blended += m;
}

/* ---- time-scaling ----------------------------------------------------- */

static int pick_timescale_lag(ac_jb *jb, int64_t n, int *lag)
{
    float corr;
    int L = best_lag(jb, jb->work, (int)n, jb->maxlag, 0, &corr);
    if (corr >= TIMESCALE_MIN_CORR) {
        *lag = L;
        return 1;
    }
    if (mean_power(jb->work, 2 * jb->maxlag) < QUIET_POWER) {
        *lag = jb->maxlag;
        return 1;
    }
    return 0;
}

/* Plays frame + L source samples in one frame: the first period is
 * cross-faded with the next. */
static int accelerate(ac_jb *jb, int16_t *out, int64_t *pos)
{
    int F = jb->frame, ch = jb->ch, L;
    int64_t n = F + jb->maxlag;
    ring_get(jb, jb->read, n, jb->tmp);
    load_analysis(jb, jb->tmp, n);
    if (!pick_timescale_lag(jb, n, &L))
        return 0;
    const int16_t *x = jb->tmp;
    for (int k = 0; k < L; k++) {
        float w = (float)(k + 1) / (float)(L + 1);
        for (int c = 0; c < ch; c++)
            out[k * ch + c] = sat16((1 - w) * x[k * ch + c] + w * x[(k + L) * ch + c]);
        pos[k] = -1;
    }
    memcpy(out + L * ch, x + 2 * L * ch, (size_t)((F - L) * ch) * sizeof(int16_t));
    for (int k = L; k < F; k++)
        pos[k] = jb->read + k + L;
    jb->read += F + L;
    jb->st.removed += L;
    jb->st.blended += L;
    jb->st.played += F - L;
    jb->st.accelerations++;
    jb->level_avg -= L;
    return 1;
}

/* Plays frame - L source samples in one frame: one period is repeated,
 * cross-faded into its copy. */
static int expand(ac_jb *jb, int16_t *out, int64_t *pos)
{
    int F = jb->frame, ch = jb->ch, L;
    int64_t n = max64(F, 2 * jb->maxlag);
    ring_get(jb, jb->read, n, jb->tmp);
    load_analysis(jb, jb->tmp, n);
    if (!pick_timescale_lag(jb, 2 * jb->maxlag, &L))
        return 0;
    const int16_t *x = jb->tmp;
    memcpy(out, x, (size_t)(L * ch) * sizeof(int16_t));
    for (int k = 0; k < L; k++) {
        float w = (float)(k + 1) / (float)(L + 1);
        pos[k] = jb->read + k;
        for (int c = 0; c < ch; c++)
            out[(L + k) * ch + c] = sat16((1 - w) * x[(L + k) * ch + c] + w * x[k * ch + c]);
        pos[L + k] = -1;
    }
    memcpy(out + 2 * L * ch, x + L * ch, (size_t)((F - 2 * L) * ch) * sizeof(int16_t));
    for (int k = 2 * L; k < F; k++)
        pos[k] = jb->read + k - L;
    jb->read += F - L;
    jb->st.inserted += L;
    jb->st.blended += L;
    jb->st.played += F - L;
    jb->st.expansions++;
    jb->level_avg += L;
    return 1;
}

/* ---- source inspection ------------------------------------------------ */

enum { SRC_DATA, SRC_GAP, SRC_EMPTY, SRC_END };

static void drop_played_spans(ac_jb *jb)
{
    int i = 0;
    while (i < jb->nspans && jb->spans[i].end <= jb->read)
        i++;
    if (i) {
        memmove(jb->spans, jb->spans + i, (size_t)(jb->nspans - i) * sizeof(span));
        jb->nspans -= i;
    }
}

/* What lies at the read position, and how long it lasts. */
static int probe(ac_jb *jb, int64_t *len)
{
    int64_t bound = jb->nbounds ? jb->bounds[jb->bhead] : INT64_MAX;
    if (jb->cfg.mode == AC_JB_STREAM) {
        *len = min64(bound, jb->end) - jb->read;
        return *len > 0 ? SRC_DATA : (jb->nbounds ? SRC_END : SRC_EMPTY);
    }
    drop_played_spans(jb);
    if (bound <= jb->read)
        return SRC_END;
    if (!jb->nspans)
        return SRC_EMPTY;
    if (jb->spans[0].start <= jb->read) {
        *len = min64(bound, jb->spans[0].end) - jb->read;
        return SRC_DATA;
    }
    *len = jb->spans[0].start - jb->read;
    return SRC_GAP;
}

static int64_t buffered(const ac_jb *jb)
{
    if (jb->cfg.mode == AC_JB_STREAM)
        return jb->end - jb->read;
    return jb->anchored ? max64(0, jb->end - jb->read) : 0;
}

static void pop_bound(ac_jb *jb)
{
    jb->bhead = (jb->bhead + 1) % MAX_BOUNDS;
    jb->nbounds--;
}

static int try_start(ac_jb *jb)
{
    int64_t len;
    if (jb->cfg.mode == AC_JB_TIMELINE) {
        /* An ended stream plays whatever it has. */
        if (!jb->anchored || (buffered(jb) < max64(1, jb->target) && !jb->nbounds))
            return 0;
    } else {
        int kind;
        while ((kind = probe(jb, &len)) == SRC_END)
            pop_bound(jb); /* a turn that ended before any of it played */
        if (kind != SRC_DATA)
            return 0;
        /* A finished turn shorter than the pre-roll starts at once. */
        int tail = jb->nbounds && jb->bounds[jb->bhead] == jb->read + len;
        if (len < jb->cfg.start_level && !tail)
            return 0;
    }
    jb->playing = 1;
    jb->level_init = 0;
    jb->accelerating = jb->expanding = 0;
    jb->debt = 0;
    return 1;
}

static void end_playing(ac_jb *jb)
{
    jb->playing = 0;
    jb->accelerating = jb->expanding = 0;
    jb->debt = 0;
    if (jb->cfg.mode == AC_JB_TIMELINE) {
        jb->anchored = 0;
        jb->nspans = 0;
        jb->have_seq = jb->have_ts = 0;
    }
}

/* ---- pop -------------------------------------------------------------- */

void ac_jb_pop(ac_jb *jb, int16_t *out, int64_t *pos)
{
    const int F = jb->frame, ch = jb->ch;
    int64_t n = 0, len;
    if (!pos)
        pos = jb->posbuf;
    if (jb->fade_pending) {
        jb->fade_pending = 0;
        if (!jb->conceal_active)
            start_conceal(jb, out, 0);
        jb->fade_left = jb->fade_len;
    }
    if (jb->fade_left > 0)
        n = fade_out(jb, out, pos, 0, F);
    if (n > 0 || (!jb->playing && !try_start(jb)))
        goto idle;

    int64_t level = buffered(jb);
    if (!jb->level_init) {
        jb->level_avg = (double)level;
        jb->level_init = 1;
    } else {
        /* ~8-frame smoothing: reacts within a packet burst, ignores one. */
        jb->level_avg += ((double)level - jb->level_avg) * 0.125;
    }
    if (jb->acc_on >= 0) {
        if (jb->level_avg > (double)jb->acc_on)
            jb->accelerating = 1;
        else if (jb->level_avg <= (double)jb->acc_off)
            jb->accelerating = 0;
    }
    if (jb->exp_on >= 0) {
        if (jb->level_avg < (double)jb->exp_on)
            jb->expanding = 1;
        else if (jb->level_avg >= (double)jb->exp_off)
            jb->expanding = 0;
    }
    if (!jb->conceal_active && probe(jb, &len) == SRC_DATA) {
        if ((jb->accelerating && len >= F + jb->maxlag && accelerate(jb, out, pos)) ||
            (jb->expanding && len >= max64(F, 2 * jb->maxlag) && expand(jb, out, pos))) {
            jb->debt = 0;
            n = F;
        }
    }

    while (n < F) {
        int64_t room = F - n;
        int kind = probe(jb, &len);
        if (kind == SRC_DATA) {
            if (jb->debt > jb->target) {
                /* Late by more than the whole target (a delay spike):
                 * keeping it all would add the spike to the delay, so drop
                 * the overdue audio down to the target level, as a buffer
                 * with that fixed delay would have.  Shorter stalls keep
                 * everything and are compressed away later. */
                int64_t skip = min64(min64(jb->debt, len), max64(0, buffered(jb) - jb->target));
                jb->debt = 0;
                jb->read += skip;
                jb->st.late_samples += skip;
                continue;
            }
            if (jb->conceal_active) {
                int tail = jb->nbounds && jb->bounds[jb->bhead] == jb->read + len;
                if (jb->cfg.mode == AC_JB_STREAM && len < jb->cfg.resume_level && !tail) {
                    conceal(jb, out, pos, n, room);
                    n = F;
                    break;
                }
                int64_t m = min64(min64(jb->merge_len, len), room);
                merge(jb, out, pos, n, m);
                jb->read += m;
                n += m;
                jb->debt = 0;
                continue;
            }
            int64_t take = min64(len, room);
            ring_get(jb, jb->read, take, out + n * ch);
            for (int64_t k = 0; k < take; k++)
                pos[n + k] = jb->read + k;
            jb->read += take;
            n += take;
            jb->st.played += take;
            jb->debt = 0;
        } else if (kind == SRC_GAP) {
            /* Time already spent stalled pays for part of the hole. */
            int64_t skip = min64(jb->debt, len);
            jb->read += skip;
            jb->debt -= skip;
            if (len == skip)
                continue;
            int64_t c = min64(len - skip, room);
            conceal(jb, out, pos, n, c);
            jb->read += c;
            n += c;
        } else if (kind == SRC_EMPTY) {
            conceal(jb, out, pos, n, room);
            if (jb->cfg.mode == AC_JB_TIMELINE)
                jb->debt += room;
            n = F;
        } else {
            pop_bound(jb);
            end_playing(jb);
            if (jb->conceal_active) {
                jb->fade_len = jb->fade_left = jb->end_fade;
                n += fade_out(jb, out, pos, n, room);
            }
            break;
        }
    }
idle:
    if (n < F) {
        memset(out + n * ch, 0, (size_t)((F - n) * ch) * sizeof(int16_t));
        for (int64_t k = n; k < F; k++)
            pos[k] = -1;
        jb->st.idle += F - n;
    }
    history_append(jb, out, F);
    jb->st.emitted += F;
}

/* ---- push ------------------------------------------------------------- */

static void seq_mark(ac_jb *jb, int64_t u) { jb->seen[(u % SEQ_WINDOW) / 64] |= 1ULL << (u % 64); }
static int seq_seen(const ac_jb *jb, int64_t u)
{
    return (jb->seen[(u % SEQ_WINDOW) / 64] >> (u % 64)) & 1;
}

/* Holds the level near `target` by time-scaling, with hysteresis: a
 * quarter of the target or half a frame above before compressing, an
 * eighth or a quarter frame below before stretching, each stopping an
 * eighth of a frame short of the target. */
static void set_target(ac_jb *jb, int64_t target)
{
    int64_t F = jb->frame;
    target = max64(jb->min_level, min64(jb->max_level, target));
    jb->target = target;
    ac_jb_set_timescale(jb, target + max64(F / 2, target / 4), target + F / 8,
                        max64(1, target - max64(F / 4, target / 8)), target - F / 8);
}

static void update_target(ac_jb *jb, int64_t t, int64_t n, double arrival)
{
    double d = arrival - (double)t / jb->cfg.rate;
    /* Window of recent (arrival, delay) pairs in arrival order. */
    while (jb->win_n &&
           (jb->win_n == DELAY_WINDOW ||
            jb->win_arrival[(jb->win_head - jb->win_n + DELAY_WINDOW) % DELAY_WINDOW] <
                arrival - DELAY_WINDOW_S))
        jb->win_n--;
    jb->win_arrival[jb->win_head] = arrival;
    jb->win_delay[jb->win_head] = d;
    jb->win_head = (jb->win_head + 1) % DELAY_WINDOW;
    jb->win_n++;
    double dmin = d;
    for (int i = 1; i <= jb->win_n; i++) {
        double v = jb->win_delay[(jb->win_head - i + DELAY_WINDOW) % DELAY_WINDOW];
        dmin = v < dmin ? v : dmin;
    }
    int bin = (int)((d - dmin) * 1000.0 / DELAY_BIN_MS);
    bin = bin < 0 ? 0 : (bin >= jb->nbins ? jb->nbins - 1 : bin);
    /* Forgetting ramps in, so the first packets are not outvoted by an
     * empty histogram. */
    jb->packets_seen += 1;
    double f = jb->forget < 1.0 - 1.0 / jb->packets_seen ? jb->forget : 1.0 - 1.0 / jb->packets_seen;
    for (int b = 0; b < jb->nbins; b++)
        jb->delay_hist[b] *= f;
    jb->delay_hist[bin] += 1.0 - f;
    double acc = 0, want = jb->quantile;
    int q = 0;
    for (; q < jb->nbins - 1; q++) {
        acc += jb->delay_hist[q];
        if (acc >= want)
            break;
    }
    double rel = (q + 1) * DELAY_BIN_MS / 1000.0;
    /* The frame being played, the relative delay to ride out, and half a
     * packet for the phase between arrivals and pops. */
    int64_t target = jb->frame + (int64_t)(rel * jb->cfg.rate) + n / 2;
    set_target(jb, target);
}

static int push_stream(ac_jb *jb, const int16_t *pcm, int64_t n)
{
    int64_t over = jb->end - jb->read + n - jb->cap;
    if (over > 0) {
        if (!jb->cfg.drop_on_overflow)
            return AC_JB_FULL;
        if (n > jb->cap) {
            pcm += (n - jb->cap) * jb->ch;
            jb->st.discarded += n - jb->cap;
            over -= n - jb->cap;
            n = jb->cap;
        }
        jb->read += over;
        jb->st.discarded += over;
        while (jb->nbounds && jb->bounds[jb->bhead] < jb->read)
            pop_bound(jb);
    }
    ring_put(jb, jb->end, pcm, n);
    jb->end += n;
    jb->st.received += n;
    jb->st.received_packets++;
    return AC_JB_OK;
}

static int insert_span(ac_jb *jb, int64_t s, int64_t e)
{
    int i = 0;
    while (i < jb->nspans && jb->spans[i].end < s)
        i++;
    int j = i;
    while (j < jb->nspans && jb->spans[j].start <= e) {
        s = min64(s, jb->spans[j].start);
        e = max64(e, jb->spans[j].end);
        j++;
    }
    if (j == i) {
        if (jb->nspans == MAX_SPANS)
            return 0;
        memmove(jb->spans + i + 1, jb->spans + i, (size_t)(jb->nspans - i) * sizeof(span));
        jb->nspans++;
    } else if (j > i + 1) {
        memmove(jb->spans + i + 1, jb->spans + j, (size_t)(jb->nspans - j) * sizeof(span));
        jb->nspans -= j - i - 1;
    }
    jb->spans[i].start = s;
    jb->spans[i].end = e;
    return 1;
}

static int covered(const ac_jb *jb, int64_t s, int64_t e)
{
    for (int i = 0; i < jb->nspans; i++)
        if (jb->spans[i].start <= s && e <= jb->spans[i].end)
            return 1;
    return 0;
}

static int push_timeline(ac_jb *jb, const int16_t *pcm, int64_t n, int64_t seq, int64_t timestamp,
                         double arrival)
{
    int64_t u = -1, t;
    if (seq >= 0) {
        if (!jb->have_seq) {
            jb->have_seq = 1;
            jb->seq_hi = seq + 65536; /* stays positive after a backward step */
            memset(jb->seen, 0, sizeof(jb->seen));
        }
        u = jb->seq_hi + (int16_t)(uint16_t)(seq - (jb->seq_hi & 0xffff));
        if (u <= jb->seq_hi - SEQ_WINDOW) {
            jb->st.late_packets++;
            jb->st.late_samples += n;
            return AC_JB_LATE;
        }
        if (u <= jb->seq_hi && seq_seen(jb, u)) {
            jb->st.duplicate_packets++;
            return AC_JB_DUPLICATE;
        }
        for (int64_t v = jb->seq_hi + 1; v <= u && v <= jb->seq_hi + SEQ_WINDOW; v++)
            jb->seen[(v % SEQ_WINDOW) / 64] &= ~(1ULL << (v % 64));
        jb->seq_hi = max64(jb->seq_hi, u);
    }
    if (timestamp < 0)
        timestamp = (u * n) & 0xffffffff;
    if (!jb->have_ts) {
        jb->have_ts = 1;
        jb->ts_hi = timestamp + ((int64_t)1 << 32);
    }
    t = jb->ts_hi + (int32_t)(uint32_t)(timestamp - (jb->ts_hi & 0xffffffff));
    jb->ts_hi = max64(jb->ts_hi, t);
    if (jb->quantile > 0 && isfinite(arrival))
        update_target(jb, t, n, arrival);
    if (!jb->anchored) {
        jb->anchored = 1;
        jb->read = jb->end = t;
        jb->nspans = 0;
        jb->playing = 0;
    }
    int64_t s = t, e = t + n;
    if (!jb->playing && s < jb->read && jb->end - s <= jb->cap)
        jb->read = s; /* still buffering: an earlier packet just came second */
    if (e <= jb->read) {
        if (u >= 0)
            seq_mark(jb, u); /* received, if uselessly: a second copy is a duplicate */
        jb->st.late_packets++;
        jb->st.late_samples += n;
        return AC_JB_LATE;
    }
    if (seq < 0 && covered(jb, s, e)) {
        jb->st.duplicate_packets++;
        return AC_JB_DUPLICATE;
    }
    if (e - jb->read > jb->cap) {
        /* A jump past the whole buffer: the sender restarted its clock or
         * was silent for longer than we hold.  Start over from here. */
        jb->st.discarded += buffered(jb);
        jb->nspans = 0;
        jb->read = jb->end = s;
        jb->playing = 0;
        if (n > jb->cap) {
            jb->st.discarded += n - jb->cap;
            pcm += (n - jb->cap) * jb->ch;
            s = e - jb->cap;
            jb->read = jb->end = s;
        }
    }
    int result = AC_JB_OK;
    if (s < jb->read) {
        jb->st.late_samples += jb->read - s;
        pcm += (jb->read - s) * jb->ch;
        s = jb->read;
        result = AC_JB_PARTLY_LATE;
    }
    if (!insert_span(jb, s, e)) {
        jb->st.discarded += e - s;
        return AC_JB_FULL;
    }
    ring_put(jb, s, pcm, e - s);
    jb->end = max64(jb->end, e);
    if (u >= 0)
        seq_mark(jb, u);
    jb->st.received += e - s;
    jb->st.received_packets++;
    return result;
}

int ac_jb_push(ac_jb *jb, const int16_t *pcm, int64_t n, int64_t seq, int64_t timestamp,
               double arrival)
{
    int r;
    if (n <= 0)
        return AC_JB_OK;
    if (jb->cfg.mode == AC_JB_STREAM)
        r = push_stream(jb, pcm, n);
    else
        r = push_timeline(jb, pcm, n, seq, timestamp, arrival);
    jb->st.high_water = max64(jb->st.high_water, buffered(jb));
    return r;
}

/* ---- control ---------------------------------------------------------- */

int ac_jb_end_turn(ac_jb *jb)
{
    int64_t at = jb->cfg.mode == AC_JB_STREAM ? jb->end : (jb->anchored ? jb->end : jb->read);
    if (jb->cfg.mode == AC_JB_TIMELINE && !jb->anchored)
        return 0;
    if (jb->nbounds && jb->bounds[(jb->bhead + jb->nbounds - 1) % MAX_BOUNDS] == at)
        return 0;
    if (jb->nbounds == MAX_BOUNDS)
        return -1;
    jb->bounds[(jb->bhead + jb->nbounds) % MAX_BOUNDS] = at;
    jb->nbounds++;
    return 0;
}

void ac_jb_flush(ac_jb *jb, int64_t fade)
{
    jb->st.discarded += buffered(jb);
    if (jb->cfg.mode == AC_JB_STREAM)
        jb->read = jb->end;
    jb->nbounds = 0;
    int was_active = jb->playing || jb->conceal_active || jb->fade_left > 0;
    end_playing(jb);
    jb->fade_pending = was_active && fade > 0;
    jb->fade_len = fade;
    jb->fade_left = 0;
    if (!jb->fade_pending)
        jb->conceal_active = 0;
}

void ac_jb_set_timescale(ac_jb *jb, int64_t acc_on, int64_t acc_off, int64_t exp_on,
                         int64_t exp_off)
{
    jb->acc_on = acc_on;
    jb->acc_off = acc_off;
    jb->exp_on = exp_on;
    jb->exp_off = exp_off;
}

void ac_jb_set_adaptive(ac_jb *jb, double quantile, double forget, int64_t min_level,
                        int64_t max_level, int64_t initial_level)
{
    jb->quantile = quantile;
    jb->forget = forget;
    jb->min_level = min_level;
    jb->max_level = max_level;
    set_target(jb, initial_level);
}

const ac_jb_stats *ac_jb_get_stats(const ac_jb *jb) { return &jb->st; }
int64_t ac_jb_read_pos(const ac_jb *jb) { return jb->read; }
int64_t ac_jb_write_pos(const ac_jb *jb) { return jb->end; }
int64_t ac_jb_level(const ac_jb *jb) { return buffered(jb); }
int64_t ac_jb_target(const ac_jb *jb) { return jb->target; }
int ac_jb_playing(const ac_jb *jb) { return jb->playing || jb->fade_pending || jb->fade_left > 0; }

int64_t ac_jb_ready(ac_jb *jb)
{
    int64_t len;
    return probe(jb, &len) == SRC_DATA ? len : 0;
}
