/* The jitter core's player: the public API of jitter.h over its three parts,
 * the source (jb_ring: ring, turn ends, timeline), the synthesis
 * (jb_conceal: concealment, fades, time-scaling) and the delay estimator
 * (jb_delay).  It decides, frame by frame, what each output sample is. */
#include "jitter.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "jb_conceal.h"
#include "jb_delay.h"
#include "jb_ring.h"
#include "pcm.h"

struct ac_jb {
    ac_jb_config cfg;
    ac_ring src;    /* what there is to play */
    ac_conceal dsp; /* what is made up or time-scaled */
    ac_delay delay; /* TIMELINE: the target level the arrivals call for */
    int playing;
    int64_t target, min_level, max_level;
    int16_t *frame_buf; /* the frame being built, native int16 */
    int64_t *posbuf;    /* positions when the caller wants none */
    ac_jb_stats st;
};

ac_jb *ac_jb_new(const ac_jb_config *cfg)
{
    if (cfg->rate < 1000 || cfg->channels < 1 || cfg->channels > AC_MAX_CHANNELS ||
        cfg->frame < 8 || cfg->capacity < 4 * (int64_t)cfg->frame || cfg->start_level < 0 ||
        cfg->resume_level < 0 || (cfg->mode != AC_JB_STREAM && cfg->mode != AC_JB_TIMELINE))
        return NULL;
    ac_jb *jb = calloc(1, sizeof(*jb));
    if (!jb)
        return NULL;
    jb->cfg = *cfg;
    jb->target = cfg->start_level;
    int failed = ac_ring_init(&jb->src, cfg) < 0;
    failed |= ac_conceal_init(&jb->dsp, cfg->rate, cfg->channels, cfg->frame) < 0;
    failed |= ac_delay_init(&jb->delay, cfg->rate, cfg->frame) < 0;
    jb->frame_buf = malloc((size_t)cfg->frame * (size_t)cfg->channels * sizeof(int16_t));
    jb->posbuf = malloc((size_t)cfg->frame * sizeof(int64_t));
    if (failed || !jb->frame_buf || !jb->posbuf) {
        ac_jb_free(jb);
        return NULL;
    }
    return jb;
}

void ac_jb_free(ac_jb *jb)
{
    if (!jb)
        return;
    ac_ring_free(&jb->src);
    ac_conceal_free(&jb->dsp);
    ac_delay_free(&jb->delay);
    free(jb->frame_buf);
    free(jb->posbuf);
    free(jb);
}

/* ---- playout ------------------------------------------------------------ */

static int try_start(ac_jb *jb)
{
    if (!ac_ring_can_start(&jb->src, jb->target))
        return 0;
    jb->playing = 1;
    ac_stretch_reset(&jb->dsp);
    jb->src.debt = 0;
    return 1;
}

static void end_playing(ac_jb *jb)
{
    jb->playing = 0;
    ac_stretch_reset(&jb->dsp);
    ac_ring_stop(&jb->src);
}

/* A playing turn whose every sample has been popped, with its end at the
 * read position, is over now.  Left there, that end would make the next
 * pop a frame of silence and hold the next turn's audio behind it
 * (frames_ready 0); a consumer that pops only ready frames would wait for
 * ever.  Checked where either side can complete a turn: pop() after a full
 * frame, end_turn() after the last frame already left. */
static void end_if_played_out(ac_jb *jb)
{
    int64_t len;
    if (jb->playing && !jb->dsp.active && ac_ring_probe(&jb->src, &len) == AC_SRC_END) {
        ac_ring_pop_bound(&jb->src);
        end_playing(jb);
    }
}

void ac_jb_pop(ac_jb *jb, void *out_le, int64_t *pos)
{
    const int F = jb->cfg.frame, ch = jb->cfg.channels;
    ac_ring *src = &jb->src;
    ac_conceal *dsp = &jb->dsp;
    int16_t *out = jb->frame_buf;
    int64_t n, len;
    if (!pos)
        pos = jb->posbuf;
    n = ac_conceal_flush_fade(dsp, out, pos, &jb->st);
    if (n > 0 || (!jb->playing && !try_start(jb)))
        goto idle;

    ac_stretch_observe(dsp, ac_ring_buffered(src));
    if (!dsp->active && ac_ring_probe(src, &len) == AC_SRC_DATA) {
        int64_t used = ac_stretch_frame(dsp, src, len, out, pos, &jb->st);
        if (used > 0) {
            src->read += used;
            src->debt = 0;
            n = F;
        }
    }

    while (n < F) {
        int64_t room = F - n;
        int kind = ac_ring_probe(src, &len);
        if (kind == AC_SRC_DATA) {
            if (src->debt > jb->target) {
                /* Late by more than the whole target (a delay spike):
                 * keeping it all would add the spike to the delay, so drop
                 * the overdue audio down to the target level, as a buffer
                 * with that fixed delay would have.  Shorter stalls keep
                 * everything and are compressed away later. */
                int64_t skip =
                    min64(min64(src->debt, len), max64(0, ac_ring_buffered(src) - jb->target));
                src->debt = 0;
                src->read += skip;
                jb->st.late_samples += skip;
                continue;
            }
            if (dsp->active) {
                if (!ac_ring_can_resume(src, len)) {
                    ac_conceal_fill(dsp, out, pos, n, room, &jb->st);
                    n = F;
                    break;
                }
                int64_t m = min64(min64(dsp->merge_len, len), room);
                ac_conceal_merge(dsp, src, out, pos, n, m, &jb->st);
                src->read += m;
                n += m;
                src->debt = 0;
                continue;
            }
            int64_t take = min64(len, room);
            ac_ring_get(src, src->read, take, out + n * ch);
            for (int64_t k = 0; k < take; k++)
                pos[n + k] = src->read + k;
            src->read += take;
            n += take;
            jb->st.played += take;
            src->debt = 0;
        } else if (kind == AC_SRC_GAP) {
            /* Time already spent stalled pays for part of the hole. */
            int64_t skip = min64(src->debt, len);
            src->read += skip;
            src->debt -= skip;
            if (len == skip)
                continue;
            int64_t c = min64(len - skip, room);
            ac_conceal_fill(dsp, out, pos, n, c, &jb->st);
            src->read += c;
            n += c;
        } else if (kind == AC_SRC_EMPTY) {
            ac_conceal_fill(dsp, out, pos, n, room, &jb->st);
            ac_ring_stalled(src, room);
            n = F;
        } else {
            ac_ring_pop_bound(src);
            end_playing(jb);
            n += ac_conceal_end(dsp, out, pos, n, room, &jb->st);
            break;
        }
    }
    if (n == F)
        end_if_played_out(jb);
idle:
    if (n < F) {
        memset(out + n * ch, 0, (size_t)((F - n) * ch) * sizeof(int16_t));
        for (int64_t k = n; k < F; k++)
            pos[k] = -1;
        jb->st.idle += F - n;
    }
    ac_conceal_history(dsp, out, F);
    jb->st.emitted += F;
    ac_store_s16le_n(out_le, out, (size_t)F * (size_t)ch);
}

/* ---- push --------------------------------------------------------------- */

/* Holds the level near `target` by time-scaling, with hysteresis: a
 * quarter of the target or half a frame above before compressing, an
 * eighth or a quarter frame below before stretching, each stopping an
 * eighth of a frame short of the target. */
static void set_target(ac_jb *jb, int64_t target)
{
    int64_t F = jb->cfg.frame;
    target = max64(jb->min_level, min64(jb->max_level, target));
    jb->target = target;
    ac_stretch_set(&jb->dsp, target + max64(F / 2, target / 4), target + F / 8,
                   max64(1, target - max64(F / 4, target / 8)), target - F / 8);
}

int ac_jb_push(ac_jb *jb, const void *pcm, int64_t n, int64_t seq, int64_t timestamp,
               double arrival)
{
    int r;
    if (n <= 0)
        return AC_JB_OK;
    if (jb->cfg.mode == AC_JB_STREAM) {
        r = ac_ring_append(&jb->src, pcm, n, &jb->st);
    } else {
        int64_t u, t;
        r = ac_ring_unwrap(&jb->src, n, seq, timestamp, &u, &t, &jb->st);
        if (r == AC_JB_OK) {
            if (ac_delay_active(&jb->delay) && isfinite(arrival))
                set_target(jb, ac_delay_update(&jb->delay, t, n, arrival));
            r = ac_ring_place(&jb->src, pcm, n, u, t, &jb->playing, &jb->st);
        }
    }
    jb->st.high_water = max64(jb->st.high_water, ac_ring_buffered(&jb->src));
    return r;
}

/* ---- control ------------------------------------------------------------ */

int ac_jb_end_turn(ac_jb *jb)
{
    int r = ac_ring_end_turn(&jb->src);
    if (r == 0)
        end_if_played_out(jb);
    return r;
}

void ac_jb_flush(ac_jb *jb, int64_t fade)
{
    int was_playing = jb->playing;
    ac_ring_flush(&jb->src, &jb->st);
    end_playing(jb);
    ac_conceal_flush(&jb->dsp, fade, was_playing);
}

void ac_jb_set_timescale(ac_jb *jb, int64_t acc_on, int64_t acc_off, int64_t exp_on,
                         int64_t exp_off)
{
    ac_stretch_set(&jb->dsp, acc_on, acc_off, exp_on, exp_off);
}

void ac_jb_set_adaptive(ac_jb *jb, double quantile, double forget, int64_t min_level,
                        int64_t max_level, int64_t initial_level)
{
    ac_delay_configure(&jb->delay, quantile, forget);
    jb->min_level = min_level;
    jb->max_level = max_level;
    set_target(jb, initial_level);
}

const ac_jb_stats *ac_jb_get_stats(const ac_jb *jb) { return &jb->st; }
int64_t ac_jb_read_pos(const ac_jb *jb) { return jb->src.read; }
int64_t ac_jb_write_pos(const ac_jb *jb) { return jb->src.end; }
int64_t ac_jb_level(const ac_jb *jb) { return ac_ring_buffered(&jb->src); }
int64_t ac_jb_target(const ac_jb *jb) { return jb->target; }
int ac_jb_turn_room(const ac_jb *jb) { return AC_RING_MAX_BOUNDS - jb->src.nbounds; }
int ac_jb_playing(const ac_jb *jb) { return jb->playing || ac_conceal_fading(&jb->dsp); }

int64_t ac_jb_ready(ac_jb *jb)
{
    int64_t len;
    return ac_ring_probe(&jb->src, &len) == AC_SRC_DATA ? len : 0;
}

int64_t ac_jb_frames_ready(ac_jb *jb)
{
    int64_t len;
    if (ac_ring_probe(&jb->src, &len) != AC_SRC_DATA || ac_conceal_fading(&jb->dsp))
        return 0;
    /* What pop() would decide; with audio at the read position, asking
     * whether playout can start changes nothing. */
    if (!jb->playing ? !ac_ring_can_start(&jb->src, jb->target)
                     : jb->dsp.active && !ac_ring_can_resume(&jb->src, len))
        return 0;
    int64_t tail = ac_ring_at_turn_end(&jb->src, len) ? jb->cfg.frame - 1 : 0;
    return (len + tail) / jb->cfg.frame;
}
