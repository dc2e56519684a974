"""The resampling contenders and the measurements that rate them, shared by
the pytest-benchmark suite and the comparison table.

Every contender is a streaming object behind the same two calls,
``process(chunk)`` and ``flush()``, fed float32 mono (audioop gets the same
chunks as PCM16, prepared outside any timed region).  audiocore's rows do
the harder job of the mic path: float32 in, PCM16 out, in one pass.
Quality is measured on what comes out, by one set of functions for all
(tests/core/resample_reference.py, the same code the tests use).
"""

import math
import os
import sys
import warnings

import numpy as np

from audiocore.resample import Resampler

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "core"))
from resample_reference import fit_tone, snr_db, spur_db, steady, tone  # noqa: E402

warnings.filterwarnings("ignore", category=DeprecationWarning)  # audioop

try:
    import soxr
except ImportError:  # pragma: no cover
    soxr = None
try:
    import samplerate
except ImportError:  # pragma: no cover
    samplerate = None
try:  # removed from the stdlib in 3.13
    import audioop
except ImportError:  # pragma: no cover
    audioop = None

PAIRS = [(48000, 16000), (48000, 24000), (24000, 48000), (44100, 16000)]
# The phone rate (G.711) into the models' rates and back.
PHONE_PAIRS = [(8000, 16000), (8000, 24000), (24000, 8000)]
CHUNK_MS = 20


class Audiocore:
    def __init__(self, in_rate, out_rate, quality="voice", output="s16"):
        self.stream = Resampler(in_rate, out_rate, quality=quality, output=output)
        self.process, self.flush = self.stream.process, self.stream.flush

    @staticmethod
    def as_float(out):
        if isinstance(out, bytes):
            return np.frombuffer(out, "<i2").astype(np.float32) / np.float32(32768)
        return out


class Soxr:
    def __init__(self, in_rate, out_rate, quality):
        self.stream = soxr.ResampleStream(in_rate, out_rate, 1, dtype="float32", quality=quality)
        self.process = self.stream.resample_chunk

    def flush(self):
        return self.stream.resample_chunk(np.zeros(0, np.float32), last=True)

    as_float = staticmethod(lambda out: out)


class Samplerate:
    def __init__(self, in_rate, out_rate, converter):
        self.stream = samplerate.Resampler(converter, channels=1)
        self.ratio = out_rate / in_rate
        process = self.stream.process
        ratio = self.ratio
        self.process = lambda x: process(x, ratio, False)

    def flush(self):
        return self.stream.process(np.zeros(0, np.float32), self.ratio, True)

    as_float = staticmethod(lambda out: out)


class Audioop:
    """audioop.ratecv: linear interpolation on PCM16; the baseline to beat."""

    takes_pcm16 = True

    def __init__(self, in_rate, out_rate):
        self.args = (2, 1, in_rate, out_rate)
        self.state = None

    def process(self, pcm):
        out, self.state = audioop.ratecv(pcm, *self.args, self.state)
        return out

    def flush(self):
        return b""

    as_float = staticmethod(Audiocore.as_float)


def contenders(in_rate, out_rate):
    """name -> factory of a fresh streaming contender."""
    found = {
        "audiocore voice": lambda: Audiocore(in_rate, out_rate),
        "audiocore voice f32": lambda: Audiocore(in_rate, out_rate, output="f32"),
        "audiocore high": lambda: Audiocore(in_rate, out_rate, quality="high"),
        "audiocore high f32": lambda: Audiocore(in_rate, out_rate, quality="high", output="f32"),
    }
    if soxr is not None:
        found["soxr HQ"] = lambda: Soxr(in_rate, out_rate, "HQ")
        found["soxr VHQ"] = lambda: Soxr(in_rate, out_rate, "VHQ")
    if samplerate is not None:
        found["libsamplerate medium"] = lambda: Samplerate(in_rate, out_rate, "sinc_medium")
        found["libsamplerate best"] = lambda: Samplerate(in_rate, out_rate, "sinc_best")
    if audioop is not None:
        found["audioop.ratecv"] = lambda: Audioop(in_rate, out_rate)
    return found


def one_shot(in_rate, out_rate):
    """name -> whole-buffer function (throughput only)."""
    from scipy.signal import resample_poly

    g = math.gcd(in_rate, out_rate)
    up, down = out_rate // g, in_rate // g
    return {"scipy resample_poly": lambda x: resample_poly(x, up, down)}


def speech_like(frames, rate, seed=5):
    """Noise shaped a little towards low frequencies, at speech levels."""
    rng = np.random.default_rng(seed)
    x = np.cumsum(rng.standard_normal(frames)) * 0.02
    x -= np.convolve(x, np.ones(64) / 64, mode="same")
    return np.clip(x * 0.3, -1, 1).astype(np.float32)


def feed(contender, x, chunk):
    """Stream `x` through in `chunk`-frame calls (PCM16 for audioop); returns
    the outputs per call and the tail, as float32."""
    if getattr(contender, "takes_pcm16", False):
        x = np.rint(np.clip(x, -1, 1) * 32767).astype("<i2").tobytes()
        size = 2
    else:
        size = 1
    outs = [
        contender.as_float(contender.process(x[i * size : (i + chunk) * size]))
        for i in range(0, len(x) // size, chunk)
    ]
    return outs, contender.as_float(contender.flush())


def stream_output(factory, x, in_rate):
    outs, tail = feed(factory(), x, in_rate * CHUNK_MS // 1000)
    return np.concatenate([*outs, tail]).astype(np.float64)


# ---- quality: one definition for every contender ----------------------------


def quality_row(factory, in_rate, out_rate, tones=10):
    """Alias/image rejection, passband ripple, 1 kHz SNR, delay and latency,
    and the share of 20 ms calls that return nothing."""
    nyquist = min(in_rate, out_rate) / 2
    margin = out_rate // 20  # 50 ms of transients at either end
    # Rejection of everything that lands in [0, 0.875 x Nyquist]: tones that
    # fold there (down) or the images of tones there (up).
    worst = -999.0
    if out_rate < in_rate:
        freqs = np.linspace(out_rate - 0.875 * nyquist, in_rate / 2 * 0.995, tones)
    else:
        freqs = np.linspace(100, 0.875 * nyquist, tones)
    for freq in freqs:
        y = stream_output(factory, tone(freq, in_rate, in_rate // 2, 0.9), in_rate)
        y = steady(y, margin)[: 1 << 13]
        worst = max(worst, spur_db(y, out_rate, freq if freq < out_rate / 2 else None, 0.9))
    ripple = 0.0
    for freq in np.linspace(50, 0.875 * nyquist, tones):
        y = stream_output(factory, tone(freq, in_rate, in_rate // 4), in_rate)
        amplitude, _ = fit_tone(steady(y, margin), freq, out_rate)
        ripple = max(ripple, abs(20 * math.log10(amplitude / 0.5)))
    y = stream_output(factory, tone(1000, in_rate, in_rate // 2), in_rate)
    snr = snr_db(steady(y, margin), 1000, out_rate)
    delay, latency, empty = timing(factory, in_rate, out_rate)
    return {
        "alias rejection dB": -worst,
        "passband ripple dB": ripple,
        "SNR 1 kHz dB": snr,
        "delay ms": delay,
        "latency ms": latency,
        "empty calls %": 100 * empty,
    }


def group_delay(factory, in_rate, out_rate):
    """How far (s) the output lags an aligned one: where a click lands."""
    k = in_rate // 2
    x = np.zeros(in_rate, np.float32)
    x[k] = 0.9
    y = stream_output(factory, x, in_rate)
    peak = int(np.argmax(np.abs(y)))
    # parabolic interpolation around the peak
    a, b, c = np.abs(y[peak - 1 : peak + 2])
    offset = 0.5 * (a - c) / (a - 2 * b + c) if a - 2 * b + c else 0.0
    return (peak + offset) / out_rate - k / in_rate


def timing(factory, in_rate, out_rate):
    """Delay and latency, in ms, each as (mean, max) over the output samples.

    The delay of output sample n is the time from the input instant it
    represents (n / out_rate, less the contender's group delay) arriving to
    n coming out, with input fed one frame per call: the look-ahead plus
    any hold-back.  Latency is the same with 20 ms calls, an input instant
    counting as arrived at the end of the chunk that brought it.  Also the
    share of 20 ms calls that returned nothing."""
    lag = group_delay(factory, in_rate, out_rate)
    delay = _lateness(factory, in_rate, out_rate, lag, 1, in_rate // 4)
    chunk = in_rate * CHUNK_MS // 1000
    latency = _lateness(factory, in_rate, out_rate, lag, chunk, 2 * in_rate)
    outs, _ = feed(factory(), speech_like(2 * in_rate, in_rate), chunk)
    empty = float(np.mean([len(o) == 0 for o in outs]))
    return delay, latency, empty


def _lateness(factory, in_rate, out_rate, lag, chunk, frames):
    outs, _ = feed(factory(), speech_like(frames, in_rate), chunk)
    emitted = np.cumsum([len(o) for o in outs])
    n = np.arange(emitted[-1])
    call = np.searchsorted(emitted, n, side="right")  # the call that returned n
    out_at = (call + 1) * chunk / in_rate
    instant = n / out_rate - lag
    keep = instant >= 0
    arrived = (np.floor(instant * in_rate / chunk) + 1) * chunk / in_rate
    late = (out_at - arrived)[keep] * 1000
    return float(late.mean()), float(late.max())
