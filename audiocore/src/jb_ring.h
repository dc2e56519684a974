/* The jitter core's source: what there is to play.
 *
 * A ring of PCM16 sample frames (native byte order inside, little-endian at
 * the edges) addressed by absolute stream position, the ends of finished
 * turns, and in TIMELINE mode the runs of received audio on the sender's
 * timeline with sequence and timestamp unwrapping.  Everything that differs
 * between STREAM and TIMELINE mode (jitter.h) is decided here; the player
 * (jitter.c) asks what lies at the read position and moves it. */
#ifndef AUDIOCORE_JB_RING_H
#define AUDIOCORE_JB_RING_H

#include <stdint.h>

#include "jitter.h"

/* Received-audio runs in TIMELINE mode: 20 ms packets in a 10 s buffer with
 * every other one lost need 250; more than this is refused, not corrupted. */
#define AC_RING_MAX_SPANS 512
#define AC_RING_MAX_BOUNDS 64
#define AC_RING_SEQ_WINDOW 1024 /* sequence numbers remembered for duplicate detection */

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

typedef struct ac_span {
    int64_t start, end;
} ac_span;

typedef struct ac_ring {
    int mode; /* enum ac_jb_mode */
    int ch;
    int drop_on_overflow;                /* STREAM */
    int64_t start_level, resume_level;   /* STREAM: see ac_jb_config */
    int16_t *samples;
    int64_t cap;
    int64_t read; /* next source position to play */
    int64_t end;  /* one past the newest stored sample */
    int64_t bounds[AC_RING_MAX_BOUNDS]; /* ends of finished turns, oldest first */
    int bhead, nbounds;
    /* TIMELINE */
    int anchored; /* read/end mean something */
    ac_span spans[AC_RING_MAX_SPANS]; /* stored runs, sorted, disjoint, non-adjacent */
    int nspans;
    int have_seq, have_ts;
    int64_t seq_hi, ts_hi;
    uint64_t seen[AC_RING_SEQ_WINDOW / 64];
    int64_t debt; /* samples concealed while stalled, owed back by skipping a hole */
} ac_ring;

/* What lies at the read position. */
enum { AC_SRC_DATA, AC_SRC_GAP, AC_SRC_EMPTY, AC_SRC_END };

/* 0, or -1 when out of memory. */
int ac_ring_init(ac_ring *s, const ac_jb_config *cfg);
void ac_ring_free(ac_ring *s);

/* Copies `n` sample frames from position `pos` (native int16). */
void ac_ring_get(const ac_ring *s, int64_t pos, int64_t n, int16_t *dst);

/* AC_SRC_DATA (audio for *len frames), AC_SRC_GAP (a hole of *len frames,
 * TIMELINE), AC_SRC_EMPTY (nothing yet) or AC_SRC_END (a turn ends here). */
int ac_ring_probe(ac_ring *s, int64_t *len);
int64_t ac_ring_buffered(const ac_ring *s);
/* The `len` frames of audio at the read position end a finished turn. */
int ac_ring_at_turn_end(const ac_ring *s, int64_t len);
void ac_ring_pop_bound(ac_ring *s);

/* Whether playout may start: STREAM, start_level frames of a turn (or all
 * of a shorter finished one); TIMELINE, `target` frames buffered (or any,
 * once the stream has ended). */
int ac_ring_can_start(ac_ring *s, int64_t target);
/* Whether `len` frames at the read position may end a concealment (STREAM
 * waits for resume_level, or a turn's tail). */
int ac_ring_can_resume(const ac_ring *s, int64_t len);
/* Playout stalled for `n` frames with nothing to play. */
void ac_ring_stalled(ac_ring *s, int64_t n);
/* Playout stopped: TIMELINE forgets its anchor, to start over at the next packet. */
void ac_ring_stop(ac_ring *s);

/* STREAM: appends `n` frames of little-endian PCM16. */
int ac_ring_append(ac_ring *s, const void *pcm, int64_t n, ac_jb_stats *st);
/* TIMELINE, in two steps around the delay estimator: unwraps `seq` and
 * `timestamp` to absolute *u and *t (refusing late and duplicate sequence
 * numbers), then places the `n` frames at *t.  `playing` is whether playout
 * has started; it is cleared when the timeline starts over. */
int ac_ring_unwrap(ac_ring *s, int64_t n, int64_t seq, int64_t timestamp, int64_t *u,
                   int64_t *t, ac_jb_stats *st);
int ac_ring_place(ac_ring *s, const void *pcm, int64_t n, int64_t u, int64_t t, int *playing,
                  ac_jb_stats *st);

/* ac_jb_end_turn and (the source's part of) ac_jb_flush. */
int ac_ring_end_turn(ac_ring *s);
void ac_ring_flush(ac_ring *s, ac_jb_stats *st);

#endif
