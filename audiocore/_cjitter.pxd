# C declarations of the jitter buffer core (audiocore/src/jitter.h).
from libc.stdint cimport int64_t


cdef extern from "jitter.h" nogil:
    # Anonymous: named enums would get Python enum classes we do not need.
    enum:
        AC_JB_STREAM
        AC_JB_TIMELINE

    enum:
        AC_JB_OK
        AC_JB_PARTLY_LATE
        AC_JB_FULL
        AC_JB_LATE
        AC_JB_DUPLICATE
        AC_JB_NOMEM

    ctypedef struct ac_jb_stats:
        int64_t emitted
        int64_t played
        int64_t concealed
        int64_t silent_concealed
        int64_t concealment_events
        int64_t blended
        int64_t idle
        int64_t received
        int64_t received_packets
        int64_t late_packets
        int64_t late_samples
        int64_t duplicate_packets
        int64_t discarded
        int64_t removed
        int64_t inserted
        int64_t accelerations
        int64_t expansions
        int64_t high_water

    ctypedef struct ac_jb_config:
        int rate
        int channels
        int frame
        int mode
        int64_t capacity
        int64_t start_level
        int64_t resume_level
        int drop_on_overflow

    ctypedef struct ac_jb:
        pass

    ac_jb *ac_jb_new(const ac_jb_config *cfg)
    void ac_jb_free(ac_jb *jb)
    int ac_jb_push(ac_jb *jb, const void *pcm, int64_t n, int64_t seq, int64_t timestamp,
                   double arrival)
    void ac_jb_pop(ac_jb *jb, void *out, int64_t *positions)
    int ac_jb_end_turn(ac_jb *jb)
    void ac_jb_flush(ac_jb *jb, int64_t fade)
    void ac_jb_set_timescale(ac_jb *jb, int64_t acc_on, int64_t acc_off, int64_t exp_on,
                             int64_t exp_off)
    void ac_jb_set_adaptive(ac_jb *jb, double quantile, double forget, int64_t min_level,
                            int64_t max_level, int64_t initial_level)
    const ac_jb_stats *ac_jb_get_stats(const ac_jb *jb)
    int64_t ac_jb_read_pos(const ac_jb *jb)
    int64_t ac_jb_write_pos(const ac_jb *jb)
    int64_t ac_jb_level(const ac_jb *jb)
    int64_t ac_jb_ready(ac_jb *jb)
    int64_t ac_jb_frames_ready(ac_jb *jb)
    int ac_jb_turn_room(const ac_jb *jb)
    int64_t ac_jb_target(const ac_jb *jb)
    int ac_jb_playing(const ac_jb *jb)
