#include "jb_ring.h"

#include <stdlib.h>
#include <string.h>

#include "pcm.h"

int ac_ring_init(ac_ring *s, const ac_jb_config *cfg)
{
    memset(s, 0, sizeof *s);
    s->mode = cfg->mode;
    s->ch = cfg->channels;
    s->drop_on_overflow = cfg->drop_on_overflow;
    s->start_level = cfg->start_level;
    s->resume_level = cfg->resume_level;
    s->cap = cfg->capacity;
    s->samples = malloc((size_t)(s->cap * s->ch) * sizeof(int16_t));
    return s->samples ? 0 : -1;
}

void ac_ring_free(ac_ring *s)
{
    free(s->samples);
    s->samples = NULL;
}

void ac_ring_get(const ac_ring *s, int64_t pos, int64_t n, int16_t *dst)
{
    int64_t i = pos % s->cap, first = min64(n, s->cap - i);
    memcpy(dst, s->samples + i * s->ch, (size_t)(first * s->ch) * sizeof(int16_t));
    if (n > first)
        memcpy(dst + first * s->ch, s->samples, (size_t)((n - first) * s->ch) * sizeof(int16_t));
}

/* Stores `n` frames of little-endian PCM16 at position `pos`. */
static void put(ac_ring *s, int64_t pos, const unsigned char *src, int64_t n)
{
    int64_t i = pos % s->cap, first = min64(n, s->cap - i);
    ac_load_s16le_n(s->samples + i * s->ch, src, (size_t)(first * s->ch));
    if (n > first)
        ac_load_s16le_n(s->samples, src + 2 * first * s->ch, (size_t)((n - first) * s->ch));
}

/* ---- what lies at the read position ---------------------------------- */

static void drop_played_spans(ac_ring *s)
{
    int i = 0;
    while (i < s->nspans && s->spans[i].end <= s->read)
        i++;
    if (i) {
        memmove(s->spans, s->spans + i, (size_t)(s->nspans - i) * sizeof(ac_span));
        s->nspans -= i;
    }
}

int ac_ring_probe(ac_ring *s, int64_t *len)
{
    int64_t bound = s->nbounds ? s->bounds[s->bhead] : INT64_MAX;
    if (s->mode == AC_JB_STREAM) {
        *len = min64(bound, s->end) - s->read;
        return *len > 0 ? AC_SRC_DATA : (s->nbounds ? AC_SRC_END : AC_SRC_EMPTY);
    }
    drop_played_spans(s);
    if (bound <= s->read)
        return AC_SRC_END;
    if (!s->nspans)
        return AC_SRC_EMPTY;
    if (s->spans[0].start <= s->read) {
        *len = min64(bound, s->spans[0].end) - s->read;
        return AC_SRC_DATA;
    }
    *len = s->spans[0].start - s->read;
    return AC_SRC_GAP;
}

int64_t ac_ring_buffered(const ac_ring *s)
{
    if (s->mode == AC_JB_STREAM)
        return s->end - s->read;
    return s->anchored ? max64(0, s->end - s->read) : 0;
}

int ac_ring_at_turn_end(const ac_ring *s, int64_t len)
{
    return s->nbounds && s->bounds[s->bhead] == s->read + len;
}

void ac_ring_pop_bound(ac_ring *s)
{
    s->bhead = (s->bhead + 1) % AC_RING_MAX_BOUNDS;
    s->nbounds--;
}

/* ---- playout ------------------------------------------------------------ */

int ac_ring_can_start(ac_ring *s, int64_t target)
{
    int64_t len;
    if (s->mode == AC_JB_TIMELINE) {
        /* An ended stream plays whatever it has. */
        return s->anchored && (ac_ring_buffered(s) >= max64(1, target) || s->nbounds);
    }
    int kind;
    while ((kind = ac_ring_probe(s, &len)) == AC_SRC_END)
        ac_ring_pop_bound(s); /* a turn that ended before any of it played */
    if (kind != AC_SRC_DATA)
        return 0;
    /* A finished turn shorter than the pre-roll starts at once. */
    return len >= s->start_level || ac_ring_at_turn_end(s, len);
}

int ac_ring_can_resume(const ac_ring *s, int64_t len)
{
    return s->mode != AC_JB_STREAM || len >= s->resume_level || ac_ring_at_turn_end(s, len);
}

void ac_ring_stalled(ac_ring *s, int64_t n)
{
    if (s->mode == AC_JB_TIMELINE)
        s->debt += n;
}

void ac_ring_stop(ac_ring *s)
{
    s->debt = 0;
    if (s->mode == AC_JB_TIMELINE) {
        s->anchored = 0;
        s->nspans = 0;
        s->have_seq = s->have_ts = 0;
    }
}

/* ---- STREAM: in order --------------------------------------------------- */

int ac_ring_append(ac_ring *s, const void *pcm, int64_t n, ac_jb_stats *st)
{
    const unsigned char *src = pcm;
    int64_t over = s->end - s->read + n - s->cap;
    if (over > 0) {
        if (!s->drop_on_overflow)
            return AC_JB_FULL;
        if (n > s->cap) {
            src += 2 * (n - s->cap) * s->ch;
            st->discarded += n - s->cap;
            over -= n - s->cap;
            n = s->cap;
        }
        s->read += over;
        st->discarded += over;
        while (s->nbounds && s->bounds[s->bhead] < s->read)
            ac_ring_pop_bound(s);
    }
    put(s, s->end, src, n);
    s->end += n;
    st->received += n;
    st->received_packets++;
    return AC_JB_OK;
}

/* ---- TIMELINE: at the sender's timestamps ------------------------------- */

static void seq_mark(ac_ring *s, int64_t u)
{
    s->seen[(u % AC_RING_SEQ_WINDOW) / 64] |= 1ULL << (u % 64);
}

static int seq_seen(const ac_ring *s, int64_t u)
{
    return (s->seen[(u % AC_RING_SEQ_WINDOW) / 64] >> (u % 64)) & 1;
}

static int insert_span(ac_ring *s, int64_t a, int64_t e)
{
    int i = 0;
    while (i < s->nspans && s->spans[i].end < a)
        i++;
    int j = i;
    while (j < s->nspans && s->spans[j].start <= e) {
        a = min64(a, s->spans[j].start);
        e = max64(e, s->spans[j].end);
        j++;
    }
    if (j == i) {
        if (s->nspans == AC_RING_MAX_SPANS)
            return 0;
        memmove(s->spans + i + 1, s->spans + i, (size_t)(s->nspans - i) * sizeof(ac_span));
        s->nspans++;
    } else if (j > i + 1) {
        memmove(s->spans + i + 1, s->spans + j, (size_t)(s->nspans - j) * sizeof(ac_span));
        s->nspans -= j - i - 1;
    }
    s->spans[i].start = a;
    s->spans[i].end = e;
    return 1;
}

static int covered(const ac_ring *s, int64_t a, int64_t e)
{
    for (int i = 0; i < s->nspans; i++)
        if (s->spans[i].start <= a && e <= s->spans[i].end)
            return 1;
    return 0;
}

int ac_ring_unwrap(ac_ring *s, int64_t n, int64_t seq, int64_t timestamp, int64_t *u_out,
                   int64_t *t_out, ac_jb_stats *st)
{
    int64_t u = -1;
    if (seq >= 0) {
        if (!s->have_seq) {
            s->have_seq = 1;
            s->seq_hi = seq + 65536; /* stays positive after a backward step */
            memset(s->seen, 0, sizeof(s->seen));
        }
        u = s->seq_hi + (int16_t)(uint16_t)(seq - (s->seq_hi & 0xffff));
        if (u <= s->seq_hi - AC_RING_SEQ_WINDOW) {
            st->late_packets++;
            st->late_samples += n;
            return AC_JB_LATE;
        }
        if (u <= s->seq_hi && seq_seen(s, u)) {
            st->duplicate_packets++;
            return AC_JB_DUPLICATE;
        }
        for (int64_t v = s->seq_hi + 1; v <= u && v <= s->seq_hi + AC_RING_SEQ_WINDOW; v++)
            s->seen[(v % AC_RING_SEQ_WINDOW) / 64] &= ~(1ULL << (v % 64));
        s->seq_hi = max64(s->seq_hi, u);
    }
    if (timestamp < 0)
        timestamp = (u * n) & 0xffffffff;
    if (!s->have_ts) {
        s->have_ts = 1;
        s->ts_hi = timestamp + ((int64_t)1 << 32);
    }
    int64_t t = s->ts_hi + (int32_t)(uint32_t)(timestamp - (s->ts_hi & 0xffffffff));
    s->ts_hi = max64(s->ts_hi, t);
    *u_out = u;
    *t_out = t;
    return AC_JB_OK;
}

int ac_ring_place(ac_ring *s, const void *pcm, int64_t n, int64_t u, int64_t t, int *playing,
                  ac_jb_stats *st)
{
    const unsigned char *src = pcm;
    if (!s->anchored) {
        s->anchored = 1;
        s->read = s->end = t;
        s->nspans = 0;
        *playing = 0;
    }
    int64_t a = t, e = t + n;
    if (!*playing && a < s->read && s->end - a <= s->cap)
        s->read = a; /* still buffering: an earlier packet just came second */
    if (e <= s->read) {
        if (u >= 0)
            seq_mark(s, u); /* received, if uselessly: a second copy is a duplicate */
        st->late_packets++;
        st->late_samples += n;
        return AC_JB_LATE;
    }
    if (u < 0 && covered(s, a, e)) {
        st->duplicate_packets++;
        return AC_JB_DUPLICATE;
    }
    if (e - s->read > s->cap) {
        /* A jump past the whole buffer: the sender restarted its clock or
         * was silent for longer than we hold.  Start over from here. */
        st->discarded += ac_ring_buffered(s);
        s->nspans = 0;
        s->read = s->end = a;
        *playing = 0;
        if (n > s->cap) {
            st->discarded += n - s->cap;
            src += 2 * (n - s->cap) * s->ch;
            a = e - s->cap;
            s->read = s->end = a;
        }
    }
    int result = AC_JB_OK;
    if (a < s->read) {
        st->late_samples += s->read - a;
        src += 2 * (s->read - a) * s->ch;
        a = s->read;
        result = AC_JB_PARTLY_LATE;
    }
    if (!insert_span(s, a, e)) {
        st->discarded += e - a;
        return AC_JB_FULL;
    }
    put(s, a, src, e - a);
    s->end = max64(s->end, e);
    if (u >= 0)
        seq_mark(s, u);
    st->received += e - a;
    st->received_packets++;
    return result;
}

/* ---- control ------------------------------------------------------------ */

int ac_ring_end_turn(ac_ring *s)
{
    if (s->mode == AC_JB_TIMELINE && !s->anchored)
        return 0;
    int64_t at = s->end;
    if (s->nbounds &&
        s->bounds[(s->bhead + s->nbounds - 1) % AC_RING_MAX_BOUNDS] == at)
        return 0;
    if (s->nbounds == AC_RING_MAX_BOUNDS)
        return -1;
    s->bounds[(s->bhead + s->nbounds) % AC_RING_MAX_BOUNDS] = at;
    s->nbounds++;
    return 0;
}

void ac_ring_flush(ac_ring *s, ac_jb_stats *st)
{
    st->discarded += ac_ring_buffered(s);
    if (s->mode == AC_JB_STREAM)
        s->read = s->end;
    s->nbounds = 0;
}
