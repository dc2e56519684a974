# The jitter buffer core: a thin typed layer over audiocore/src/jitter.c.
# No validation or defaults here beyond what keeps C memory safe; the
# profiles, checks and docs are in audiocore/jitter.py.
cimport cython
from cpython.buffer cimport PyBuffer_Release
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdint cimport int64_t

from audiocore._buffers cimport S16, get_samples
from audiocore._cjitter cimport *

STREAM = AC_JB_STREAM
TIMELINE = AC_JB_TIMELINE

OK = AC_JB_OK
PARTLY_LATE = AC_JB_PARTLY_LATE
FULL = AC_JB_FULL
LATE = AC_JB_LATE
DUPLICATE = AC_JB_DUPLICATE

_STAT_FIELDS = (
    "emitted", "played", "concealed", "silent_concealed", "concealment_events", "blended",
    "idle", "received", "received_packets", "late_packets", "late_samples",
    "duplicate_packets", "discarded", "removed", "inserted", "accelerations", "expansions",
    "high_water",
)


# A core holds a C pointer; pickling it would mean nothing.
@cython.auto_pickle(False)
cdef class JitterCore:
    """Ring buffer, framing, concealment, time-scaling and flush for one stream.

    Positions and lengths are in sample frames.  Not thread-safe by itself:
    the owner serialises calls.
    """

    cdef ac_jb *jb
    cdef readonly int rate
    cdef readonly int channels
    cdef readonly int frame
    cdef Py_ssize_t frame_bytes

    def __cinit__(self, *args, **kwargs):
        self.jb = NULL

    def __init__(self, int rate, int channels, int frame, int mode, int64_t capacity,
                 int64_t start_level, int64_t resume_level, bint drop_on_overflow):
        cdef ac_jb_config cfg
        if self.jb is not NULL:
            raise RuntimeError("JitterCore is already initialised")
        cfg.rate = rate
        cfg.channels = channels
        cfg.frame = frame
        cfg.mode = mode
        cfg.capacity = capacity
        cfg.start_level = start_level
        cfg.resume_level = resume_level
        cfg.drop_on_overflow = drop_on_overflow
        self.jb = ac_jb_new(&cfg)
        if self.jb is NULL:
            raise MemoryError("cannot allocate a jitter buffer of this configuration")
        self.rate = rate
        self.channels = channels
        self.frame = frame
        self.frame_bytes = <Py_ssize_t>frame * channels * 2

    cdef inline ac_jb *_jb(self) except NULL:
        if self.jb is NULL:
            raise RuntimeError("JitterCore.__init__ was not called")
        return self.jb

    def __dealloc__(self):
        ac_jb_free(self.jb)

    cdef Py_ssize_t _frames(self, object pcm, Py_buffer *view) except -1:
        # Holds `view` on success; the caller releases it.
        cdef Py_ssize_t n = get_samples(pcm, view, S16, False, "pcm")
        if n % self.channels:
            PyBuffer_Release(view)
            raise ValueError(
                f"pcm: expected whole frames of {self.channels} interleaved samples, "
                f"got {n} samples"
            )
        return n // self.channels

    def push(self, object pcm, int64_t seq, int64_t timestamp, double arrival) -> int:
        """Stores int16 samples from any C-contiguous buffer, read in place;
        seq/timestamp < 0 mean absent.  Returns a result code (OK, LATE, ...)."""
        cdef Py_buffer view
        cdef int result
        cdef Py_ssize_t n = self._frames(pcm, &view)
        try:
            result = ac_jb_push(self._jb(), view.buf, n, seq, timestamp, arrival)
        finally:
            PyBuffer_Release(&view)
        return result

    def frames_in(self, object pcm) -> int:
        """Sample frames in `pcm`, checked exactly as push() checks them."""
        cdef Py_buffer view
        cdef Py_ssize_t n = self._frames(pcm, &view)
        PyBuffer_Release(&view)
        return n

    def pop(self, int64_t[::1] positions=None) -> bytes:
        """One frame as bytes; with `positions` (frame int64s) also where each
        sample frame came from (see jitter.h)."""
        cdef bytes out = PyBytes_FromStringAndSize(NULL, self.frame_bytes)
        cdef int64_t *pos = NULL
        if positions is not None:
            if positions.shape[0] != self.frame:
                raise ValueError(f"positions must hold {self.frame} items")
            pos = &positions[0]
        ac_jb_pop(self._jb(), PyBytes_AS_STRING(out), pos)
        return out

    def end_turn(self) -> int:
        return ac_jb_end_turn(self._jb())

    def flush(self, int64_t fade) -> None:
        ac_jb_flush(self._jb(), fade)

    def set_timescale(self, int64_t acc_on, int64_t acc_off, int64_t exp_on,
                      int64_t exp_off) -> None:
        ac_jb_set_timescale(self._jb(), acc_on, acc_off, exp_on, exp_off)

    def set_adaptive(self, double quantile, double forget, int64_t min_level,
                     int64_t max_level, int64_t initial_level) -> None:
        ac_jb_set_adaptive(self._jb(), quantile, forget, min_level, max_level, initial_level)

    def stats(self) -> dict:
        cdef const ac_jb_stats *s = ac_jb_get_stats(self._jb())
        values = (
            s.emitted, s.played, s.concealed, s.silent_concealed, s.concealment_events,
            s.blended, s.idle, s.received, s.received_packets, s.late_packets,
            s.late_samples, s.duplicate_packets, s.discarded, s.removed, s.inserted,
            s.accelerations, s.expansions, s.high_water,
        )
        return dict(zip(_STAT_FIELDS, values))

    @property
    def read_pos(self) -> int:
        return ac_jb_read_pos(self._jb())

    @property
    def write_pos(self) -> int:
        return ac_jb_write_pos(self._jb())

    @property
    def level(self) -> int:
        return ac_jb_level(self._jb())

    @property
    def ready(self) -> int:
        return ac_jb_ready(self._jb())

    @property
    def frames_ready(self) -> int:
        return ac_jb_frames_ready(self._jb())

    @property
    def turn_room(self) -> int:
        return ac_jb_turn_room(self._jb())

    @property
    def received(self) -> int:
        return ac_jb_get_stats(self._jb()).received

    @property
    def target(self) -> int:
        return ac_jb_target(self._jb())

    @property
    def playing(self) -> bool:
        return ac_jb_playing(self._jb()) != 0
