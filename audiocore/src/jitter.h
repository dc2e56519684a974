/* Jitter/playout buffer core: a ring of PCM16 sample frames addressed by
 * absolute stream position, framing, concealment, time-scaling and flush.
 *
 * No policy lives here beyond mechanisms with knobs: the Python layer
 * (audiocore/jitter.py) picks the mode, thresholds and defaults per
 * profile.  Positions and lengths are in sample frames (one sample per
 * channel); audio in and out is interleaved little-endian PCM16, at any
 * alignment.
 *
 * The parts, each with its header: jb_ring (the source: ring, turn ends,
 * timeline), jb_conceal (concealment, fades, time-scaling), jb_delay (the
 * arrival-delay estimator); jitter.c plays them. */
#ifndef AUDIOCORE_JITTER_H
#define AUDIOCORE_JITTER_H

#include <stdint.h>

/* STREAM: audio is appended in order; an empty buffer stalls the read
 * position (nothing is skipped).  TIMELINE: audio lands at its timestamp;
 * holes inside the buffer are concealed and skipped, an empty buffer
 * stalls. */
enum ac_jb_mode { AC_JB_STREAM = 0, AC_JB_TIMELINE = 1 };

/* push() results; negative values are refusals. */
enum ac_jb_push_result {
    AC_JB_OK = 0,
    AC_JB_PARTLY_LATE = 1, /* the head was already played; the rest stored */
    AC_JB_FULL = -1,       /* STREAM without overflow dropping: no room */
    AC_JB_LATE = -2,       /* every sample's play time has passed */
    AC_JB_DUPLICATE = -3,  /* sequence number already received */
    AC_JB_NOMEM = -4
};

typedef struct ac_jb_stats {
    /* Output side: emitted == played + concealed + blended + idle. */
    int64_t emitted;          /* sample frames returned by pop() */
    int64_t played;           /* source samples output verbatim */
    int64_t concealed;        /* synthesized for missing audio (incl. silent) */
    int64_t silent_concealed; /* concealment output at zero gain */
    int64_t concealment_events;
    int64_t blended;          /* cross-fades (merge after concealment, time-scaling) */
    int64_t idle;             /* silence or flush fade while nothing is playing */
    /* Source side. */
    int64_t received;         /* samples stored */
    int64_t received_packets;
    int64_t late_packets;     /* refused: play time passed */
    int64_t late_samples;     /* refused or skipped: their play time had passed */
    int64_t duplicate_packets;
    int64_t discarded;        /* buffered samples dropped by flush, overflow or re-anchoring */
    int64_t removed;          /* by time compression */
    int64_t inserted;         /* by time expansion */
    int64_t accelerations;
    int64_t expansions;
    int64_t high_water;       /* largest buffered span seen */
} ac_jb_stats;

typedef struct ac_jb_config {
    int rate;
    int channels;
    int frame;             /* sample frames per pop() */
    int mode;              /* enum ac_jb_mode */
    int64_t capacity;      /* ring size in sample frames */
    int64_t start_level;   /* buffered span needed to start playing */
    int64_t resume_level;  /* STREAM: contiguous samples needed to resume after an underrun */
    int drop_on_overflow;  /* STREAM: drop the oldest audio instead of refusing */
} ac_jb_config;

typedef struct ac_jb ac_jb;

/* NULL on a bad config or no memory. */
ac_jb *ac_jb_new(const ac_jb_config *cfg);
void ac_jb_free(ac_jb *jb);

/* STREAM: appends n sample frames.  TIMELINE: stores them at `timestamp`
 * (32-bit, wraps); `seq` is the 16-bit sequence number or -1.  `arrival`
 * (seconds) feeds the delay estimator when finite. */
int ac_jb_push(ac_jb *jb, const void *pcm, int64_t n, int64_t seq, int64_t timestamp,
               double arrival);

/* Writes exactly one frame (frame * channels PCM16) to `out`, and for each
 * sample frame its source position to `positions` (may be NULL): >= 0
 * verbatim, -1 synthesized, <= -2 source -(p + 2) cross-faded with
 * synthesized audio. */
void ac_jb_pop(ac_jb *jb, void *out, int64_t *positions);

/* Ends the current turn/stream at the last pushed sample: the tail plays,
 * padded with silence to a whole frame. */
int ac_jb_end_turn(ac_jb *jb);

/* Drops everything buffered; the next pop() fades the last output to
 * silence over `fade` sample frames.  O(1). */
void ac_jb_flush(ac_jb *jb, int64_t fade);

/* Time-scaling thresholds on the smoothed buffer level (sample frames):
 * compress while above acc_on until at or below acc_off; expand while
 * below exp_on until at or above exp_off.  Negative acc_on or exp_on
 * disables that direction. */
void ac_jb_set_timescale(ac_jb *jb, int64_t acc_on, int64_t acc_off, int64_t exp_on,
                         int64_t exp_off);

/* TIMELINE: hold the buffer level at a target by time-scaling both ways.
 * The target starts at initial_level and, with quantile > 0, follows the
 * arrival statistics (a percentile of the relative packet delay, histogram
 * with forgetting), clamped to [min_level, max_level]; quantile <= 0 keeps
 * it fixed. */
void ac_jb_set_adaptive(ac_jb *jb, double quantile, double forget, int64_t min_level,
                        int64_t max_level, int64_t initial_level);

const ac_jb_stats *ac_jb_get_stats(const ac_jb *jb);
int64_t ac_jb_read_pos(const ac_jb *jb);   /* next source position to play */
int64_t ac_jb_write_pos(const ac_jb *jb);  /* one past the newest stored sample */
int64_t ac_jb_level(const ac_jb *jb);      /* buffered span, sample frames */
int64_t ac_jb_ready(ac_jb *jb);            /* contiguous samples at the read position */
/* How many pop()s in a row, from now, play source audio: whole frames of
 * `ready`, and the partial last frame of an ended turn (pop pads it with
 * silence); 0 while the next pop() would conceal, fade or wait for the
 * start level. */
int64_t ac_jb_frames_ready(ac_jb *jb);
/* How many more turns may end before the earliest has played (each ended
 * turn keeps its end until playout reaches it). */
int ac_jb_turn_room(const ac_jb *jb);
int64_t ac_jb_target(const ac_jb *jb);     /* target level, sample frames */
int ac_jb_playing(const ac_jb *jb);        /* a turn plays, or a flush fade is due */

#endif
