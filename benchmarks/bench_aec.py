"""Echo cancellation on simulated rooms: audiocore's EchoCanceller against
speexdsp and WebRTC's audio processing module, in one run.

    python benchmarks/bench_aec.py [--scenes 4] [--seed 1] [--rate 16000]
    python benchmarks/bench_aec.py --smoke   # one short scene (CI)

Each scene (seeded): a shoebox room (image method, ours below: size, RT60
0.2-0.5 s, loudspeaker and microphone placed at random), the far end
(espeak-ng voice "en") played through a clipping loudspeaker, a bulk delay
of 0-300 ms, clock drift of up to +-100 ppm between far end and microphone,
background noise at -50 dBFS, and near-end speech from another voice
("en+f3").  The timeline, in seconds of the scene:

    0 .. T1        far end alone          ERLE (last half) and convergence time
    T1 .. T2       double talk            near-end quality: segmental SNR and
                                          its median over the near-end's
                                          active 20 ms segments
    T2 .. end      far end alone, through a new echo path (the loudspeaker
                   moved): re-convergence time and ERLE after it

ERLE is 10 log10 of microphone over output energy where the far end is
active (microphone = echo + noise); convergence is the first time from
which the ERLE of 250 ms windows stays at 20 dB or more for a second.
The segmental SNR compares the output with the clean near-end (aligned by
each canceller's latency: speexdsp's and WebRTC's, which they do not
report, measured by `output_delay`), per 20 ms segment where the near end
is active, clamped to [-10, 35] dB, averaged.  CPU is the time per 10 ms frame for the
whole scene (process time of this process, median of `--repeat` runs).

Contenders, all fed 10 ms frames of PCM16 (speexdsp and WebRTC take only
PCM16; audiocore takes and returns the same):
  - audiocore EchoCanceller, default settings (tail 0.25 s, max delay 0.5 s),
    on the widest SIMD path and on the scalar one;
  - no canceller: the microphone itself, the zero point of every figure;
  - speexdsp: speex_echo_cancellation with a filter covering the largest
    delay plus 250 ms (it has no delay estimation), then the preprocessor's
    residual echo suppressor (denoise, AGC, VAD, dereverb off);
  - WebRTC AEC (Debian's webrtc-audio-processing 0.3, the older AEC), delay
    agnostic and extended filter on, stream delay 0, default suppression;
    called through a small C++ shim compiled here with g++ (at 16 kHz only:
    at 8, 24 and 48 kHz the shim's AudioFrame calls are refused).
Both anchors also run told the true bulk delay ("delay given": speexdsp's
far end delayed by it, with a 250 ms filter; WebRTC's set_stream_delay_ms,
delay-agnostic mode off), their best case, which a real call does not have.
CPU / speexdsp is to the plain speexdsp row.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import audiocore  # noqa: E402
from audiocore import _aec  # noqa: E402

FRAME_MS = 10

FAR_TEXT = [
    "The weather today will be mostly sunny with a light breeze from the west.",
    "Please hold while I look up the details of your reservation for next week.",
    "Your package was shipped this morning and should arrive within three days.",
    "I can help you with billing, technical support, or changes to your plan.",
    "The meeting has been moved to Thursday afternoon at half past two.",
    "There are four restaurants nearby that are open until midnight.",
    "Would you like me to read the full list, or only the first three items?",
    "The train to the airport leaves every fifteen minutes from platform two.",
]
NEAR_TEXT = [
    "Actually, wait, I wanted to ask about something else entirely.",
    "No, no, the second one, the one with the garden and the big windows.",
    "Can you repeat the last part a little slower, please?",
    "Sorry, my connection was bad, what did you just say about the price?",
]


# ---- speech -----------------------------------------------------------------


def espeak(text: str, voice: str, rate: int, folder: Path) -> np.ndarray:
    """`text` spoken by espeak-ng's `voice`, as float32 at `rate`."""
    path = folder / "speech.wav"
    subprocess.run(["espeak-ng", "-v", voice, "-w", str(path), text], check=True)
    info = audiocore.read_wav(path.read_bytes())
    x = np.frombuffer(info.data, "<i2").astype(np.float32) / 32768
    return audiocore.resample(x, info.sample_rate, rate, output="f32")


def speech(texts: list[str], voice: str, rate: int, seconds: float, folder: Path) -> np.ndarray:
    """Sentences of `voice` with short pauses, repeated to `seconds`."""
    parts, total, i = [], 0, 0
    pause = np.zeros(rate // 4, np.float32)
    clips = [espeak(t, voice, rate, folder) for t in texts]
    while total < seconds * rate:
        clip = clips[i % len(clips)]
        parts += [clip, pause]
        total += len(clip) + len(pause)
        i += 1
    x = np.concatenate(parts)[: int(seconds * rate)]
    return x / np.max(np.abs(x)) * 0.5


# ---- rooms ------------------------------------------------------------------


def image_rir(room, source, mic, rt60: float, rate: int, seconds: float) -> np.ndarray:
    """Impulse response of a shoebox room by the image method (Allen and
    Berkley): every image source up to the order whose delay passes
    `seconds`, one wall reflection coefficient from Sabine's RT60, each
    image a windowed-sinc fractional delay with 1/r spreading."""
    room, source, mic = (np.asarray(v, float) for v in (room, source, mic))
    c = 343.0
    volume = np.prod(room)
    surface = 2 * (room[0] * room[1] + room[0] * room[2] + room[1] * room[2])
    alpha = min(0.95, 0.161 * volume / (surface * rt60))
    beta = np.sqrt(1 - alpha)
    n = int(seconds * rate)
    h = np.zeros(n + 32)
    order = int(np.ceil(c * seconds / np.min(room))) + 1
    r = np.arange(-order, order + 1)
    for px in (0, 1):
        for py in (0, 1):
            for pz in (0, 1):
                gx, gy, gz = np.meshgrid(r, r, r, indexing="ij")
                x = (1 - 2 * px) * source[0] + 2 * gx * room[0] - mic[0]
                y = (1 - 2 * py) * source[1] + 2 * gy * room[1] - mic[1]
                z = (1 - 2 * pz) * source[2] + 2 * gz * room[2] - mic[2]
                dist = np.sqrt(x * x + y * y + z * z).ravel()
                # Allen and Berkley: an image 2g - p rooms away met |g - p| + |g|
                # walls on that axis.
                walls = (np.abs(gx - px) + np.abs(gx) + np.abs(gy - py) + np.abs(gy)).ravel()
                walls = walls + (np.abs(gz - pz) + np.abs(gz)).ravel()
                delay = dist / c * rate
                keep = delay < n
                amp = beta ** walls[keep] / np.maximum(dist[keep], 0.1)
                d = delay[keep]
                whole = np.floor(d).astype(int)
                frac = d - whole
                for k in range(-8, 9):
                    idx = whole + k
                    ok = (idx >= 0) & (idx < n)
                    t = k - frac[ok]
                    w = np.sinc(t) * (0.5 + 0.5 * np.cos(np.pi * t / 9))
                    np.add.at(h, idx[ok], amp[ok] * w)
    return h[:n]


def random_path(rng, rate: int):
    """A room with a loudspeaker and a microphone in it, at random."""
    room = rng.uniform([3, 3, 2.4], [8, 7, 3.5])
    rt60 = rng.uniform(0.2, 0.5)

    def spot():
        return rng.uniform([0.5, 0.5, 0.8], room - 0.5)

    mic = spot()
    return room, rt60, mic, lambda: image_rir(room, spot(), mic, rt60, rate, 0.4)


def loudspeaker(x: np.ndarray, drive: float) -> np.ndarray:
    """A loudspeaker driven into clipping: hard clip at 1 / drive of the
    peak (memoryless), then its own soft saturation."""
    peak = np.max(np.abs(x))
    y = np.clip(x, -peak / drive, peak / drive)
    return np.tanh(2.0 * y) / 2.0


def drifted(x: np.ndarray, ppm: float) -> np.ndarray:
    """`x` as heard by a clock `ppm` parts per million fast (linear
    interpolation: the drift matters here, not the interpolator)."""
    t = np.arange(len(x)) * (1 + ppm * 1e-6)
    return np.interp(t, np.arange(len(x)), x, right=0.0)


@dataclass
class Scene:
    name: str
    rate: int
    far: np.ndarray  # what the loudspeaker is sent
    near: np.ndarray  # the microphone
    clean: np.ndarray  # the near-end talker alone, as the microphone hears it
    echo: np.ndarray  # the echo alone (with the noise, what single talk should remove)
    t1: float
    t2: float
    delay_ms: float
    description: str


def make_scene(rng, rate: int, far_speech, near_speech, t1, t2, t3, max_delay_ms, max_ppm, name):
    room, rt60, mic, new_path = random_path(rng, rate)
    h1, h2 = new_path(), new_path()
    delay_ms = float(rng.uniform(0, max_delay_ms))
    ppm = float(rng.uniform(-max_ppm, max_ppm))
    drive = float(rng.uniform(1.2, 2.0))
    n = int(t3 * rate)
    far = far_speech[:n].astype(np.float32)
    played = loudspeaker(far.astype(float), drive)
    d = int(delay_ms * rate / 1000)
    echo1 = np.convolve(played, h1)[:n]
    echo2 = np.convolve(played, h2)[:n]
    cut = int(t2 * rate)
    echo = np.concatenate([echo1[:cut], echo2[cut:]])
    echo = np.concatenate([np.zeros(d), echo])[:n]
    echo = drifted(echo, ppm)
    # The echo at -26 dBFS (RMS over the first part): a loud loudspeaker.
    echo *= 0.05 / np.sqrt(np.mean(echo[: int(t1 * rate)] ** 2))
    near_part = np.zeros(n)
    a, b = int(t1 * rate), int(t2 * rate)
    talk = near_speech[: b - a].astype(float)
    talk = np.convolve(talk, h1[: rate // 20] / np.max(np.abs(h1)))[
        : b - a
    ]  # the talker's room too
    # Near-end speech about as loud as the echo (echo-to-near ratio ~0 dB).
    talk *= np.sqrt(np.mean(echo[a:b] ** 2) / max(np.mean(talk**2), 1e-12))
    near_part[a:b] = talk
    noise = rng.standard_normal(n) * 10 ** (-50 / 20)
    mic = echo + near_part + noise
    description = (
        f"room {room[0]:.1f}x{room[1]:.1f}x{room[2]:.1f} m, RT60 {rt60:.2f} s, "
        f"delay {delay_ms:.0f} ms, drift {ppm:+.0f} ppm, clip at 1/{drive:.1f} of peak"
    )
    return Scene(
        name,
        rate,
        far,
        mic.astype(np.float32),
        near_part.astype(np.float32),
        (echo + noise).astype(np.float32),
        t1,
        t2,
        delay_ms,
        description,
    )


# ---- contenders ---------------------------------------------------------------


def pcm16(x: np.ndarray) -> np.ndarray:
    return np.asarray(audiocore.float32_to_pcm16(np.ascontiguousarray(x, np.float32)))


class Ours:
    name = "audiocore"

    def __init__(self, rate: int, max_delay_ms: float, delay_ms: float):
        self.aec = audiocore.EchoCanceller(rate, input="s16", output="s16")
        self.latency = self.aec.latency

    def frame(self, far: bytes, near: bytes) -> bytes:
        return self.aec.process(far, near)


class Microphone:
    """No canceller: the microphone as it is, the figures' zero point."""

    name = "no canceller (microphone)"
    latency = 0

    def __init__(self, rate: int, max_delay_ms: float, delay_ms: float):
        pass

    def frame(self, far: bytes, near: bytes) -> bytes:
        return near


class OursScalar(Ours):
    """The same on the portable C path: what the SIMD kernels save."""

    name = "audiocore, scalar path"

    def __init__(self, rate: int, max_delay_ms: float, delay_ms: float):
        best = _aec._get_path()
        _aec._set_path("scalar")
        try:
            super().__init__(rate, max_delay_ms, delay_ms)
        finally:
            _aec._set_path(best)


class Speex:
    name = "speexdsp"
    aligned = False  # run() delays its far end by the true delay when set

    def __init__(self, rate: int, max_delay_ms: float, delay_ms: float):
        lib = ctypes.CDLL("libspeexdsp.so.1")
        lib.speex_echo_state_init.restype = ctypes.c_void_p
        lib.speex_echo_state_init.argtypes = [ctypes.c_int, ctypes.c_int]
        lib.speex_preprocess_state_init.restype = ctypes.c_void_p
        lib.speex_preprocess_state_init.argtypes = [ctypes.c_int, ctypes.c_int]
        lib.speex_echo_ctl.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
        lib.speex_preprocess_ctl.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
        lib.speex_echo_cancellation.argtypes = (
            [ctypes.c_void_p] + [ctypes.c_char_p] * 2 + [ctypes.c_void_p]
        )
        lib.speex_preprocess_run.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        self.lib = lib
        self.n = rate * FRAME_MS // 1000
        tail = int(((0 if self.aligned else max_delay_ms) / 1000 + 0.25) * rate)
        self.echo = lib.speex_echo_state_init(self.n, tail)
        r = ctypes.c_int(rate)
        lib.speex_echo_ctl(self.echo, 24, ctypes.byref(r))  # SPEEX_ECHO_SET_SAMPLING_RATE
        self.pre = lib.speex_preprocess_state_init(self.n, rate)
        off = ctypes.c_int(0)
        for request in (0, 2, 4, 8):  # denoise, AGC, VAD, dereverb: off
            lib.speex_preprocess_ctl(self.pre, request, ctypes.byref(off))
        lib.speex_preprocess_ctl(self.pre, 24, ctypes.c_void_p(self.echo))  # SET_ECHO_STATE
        self.out = ctypes.create_string_buffer(2 * self.n)
        self.latency = None  # measured: output_delay()

    def frame(self, far: bytes, near: bytes) -> bytes:
        self.lib.speex_echo_cancellation(self.echo, near, far, self.out)
        self.lib.speex_preprocess_run(self.pre, self.out)
        return self.out.raw


class SpeexGiven(Speex):
    """speexdsp fed the far end already delayed by the true bulk delay, with
    a 250 ms filter: its best case, which a real call does not have."""

    name = "speexdsp, delay given"
    aligned = True


def build_webrtc_shim(folder: Path) -> Path:
    """Compiles the shim against Debian's headers (g++, pkg-config)."""
    source = folder / "webrtc_shim.cc"
    source.write_text(WEBRTC_SHIM)
    library = folder / "webrtc_shim.so"
    flags = subprocess.run(
        ["pkg-config", "--cflags", "--libs", "webrtc-audio-processing"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    subprocess.run(
        ["g++", "-O2", "-shared", "-fPIC", "-o", str(library), str(source), *flags], check=True
    )
    return library


WEBRTC_SHIM = r"""
#include <webrtc/modules/audio_processing/include/audio_processing.h>
#include <webrtc/modules/interface/module_common_types.h>
#include <cstring>
extern "C" {
void *wa_new(int agnostic) {
  webrtc::Config config;
  config.Set<webrtc::DelayAgnostic>(new webrtc::DelayAgnostic(agnostic != 0));
  config.Set<webrtc::ExtendedFilter>(new webrtc::ExtendedFilter(true));
  webrtc::AudioProcessing *apm = webrtc::AudioProcessing::Create(config);
  apm->echo_cancellation()->Enable(true);
  return apm;
}
int wa_process(void *h, int rate, int delay_ms, const short *far, const short *near, short *out) {
  webrtc::AudioProcessing *apm = (webrtc::AudioProcessing *)h;
  webrtc::AudioFrame f, n;
  int len = rate / 100;
  f.sample_rate_hz_ = n.sample_rate_hz_ = rate;
  f.num_channels_ = n.num_channels_ = 1;
  f.samples_per_channel_ = n.samples_per_channel_ = len;
  std::memcpy(f.data_, far, len * 2);
  std::memcpy(n.data_, near, len * 2);
  int r = apm->ProcessReverseStream(&f);
  apm->set_stream_delay_ms(delay_ms);
  r |= apm->ProcessStream(&n);
  std::memcpy(out, n.data_, len * 2);
  return r;
}
void wa_free(void *h) { delete (webrtc::AudioProcessing *)h; }
}
"""


class WebRTC:
    name = "webrtc"
    library: Path | None = None
    agnostic = True

    def __init__(self, rate: int, max_delay_ms: float, delay_ms: float):
        lib = ctypes.CDLL(str(self.library))
        lib.wa_new.restype = ctypes.c_void_p
        lib.wa_new.argtypes = [ctypes.c_int]
        lib.wa_process.argtypes = (
            [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
            + [ctypes.c_char_p] * 2
            + [ctypes.c_void_p]
        )
        lib.wa_free.argtypes = [ctypes.c_void_p]
        self.lib = lib
        self.rate = rate
        self.handle = lib.wa_new(int(self.agnostic))
        self.delay_ms = 0 if self.agnostic else round(delay_ms)
        self.out = ctypes.create_string_buffer(2 * (rate // 100))
        self.latency = None  # measured: output_delay()

    def frame(self, far: bytes, near: bytes) -> bytes:
        if self.lib.wa_process(self.handle, self.rate, self.delay_ms, far, near, self.out) != 0:
            raise RuntimeError("webrtc: ProcessStream failed")
        return self.out.raw

    def __del__(self):
        self.lib.wa_free(self.handle)


class WebRTCGiven(WebRTC):
    """WebRTC told the true bulk delay (set_stream_delay_ms), delay-agnostic
    mode off: its best case, which a real call does not have."""

    name = "webrtc, delay given"
    agnostic = False


# ---- measures ---------------------------------------------------------------

_DELAYS: dict[tuple[str, int], int] = {}


def output_delay(contender_type, rate: int) -> int:
    """Samples by which an anchor's output lags the microphone (neither
    says; speexdsp's is a frame, WebRTC's 7 ms at 16 kHz): measured on 1 s
    of noise with no far end, nothing to cancel, as the lag of the output's
    largest cross-correlation with the input.  Taking it off matters: a
    near end compared 10 ms out of step reads about -3 dB of segmental SNR
    however well it was kept."""
    key = (contender_type.name, rate)
    if key not in _DELAYS:
        c = contender_type(rate, 0.0, 0.0)
        n = rate * FRAME_MS // 1000
        noise = np.random.default_rng(0).standard_normal(rate) * 0.03
        mic = np.frombuffer(pcm16(noise).tobytes(), "<i2")
        silent = bytes(2 * n)
        out = [c.frame(silent, mic[i * n : (i + 1) * n].tobytes()) for i in range(rate // n)]
        y = np.frombuffer(b"".join(out), "<i2").astype(np.float64)
        x = mic[: len(y)].astype(np.float64)
        score = [float(np.dot(y[lag:], x[: len(x) - lag])) for lag in range(rate // 20)]
        _DELAYS[key] = int(np.argmax(score))
    return _DELAYS[key]


def run(contender_type, scene: Scene, max_delay_ms: float):
    """The contender's output (float32, aligned with the input) and its CPU
    seconds per 10 ms frame."""
    c = contender_type(scene.rate, max_delay_ms, scene.delay_ms)
    latency = c.latency if c.latency is not None else output_delay(contender_type, scene.rate)
    n = scene.rate * FRAME_MS // 1000
    frames = len(scene.far) // n
    far = scene.far
    if getattr(c, "aligned", False):
        d = int(scene.delay_ms * scene.rate / 1000)
        far = np.concatenate([np.zeros(d, np.float32), far])[: len(far)]
    far = pcm16(far).tobytes()
    near = pcm16(scene.near).tobytes()
    far_frames = [far[2 * i * n : 2 * (i + 1) * n] for i in range(frames)]
    near_frames = [near[2 * i * n : 2 * (i + 1) * n] for i in range(frames)]
    start = time.process_time()
    out = [c.frame(f, d) for f, d in zip(far_frames, near_frames, strict=True)]
    cpu = (time.process_time() - start) / frames
    y = np.frombuffer(b"".join(out), "<i2").astype(np.float32) / 32768
    y = np.concatenate([y[latency:], np.zeros(latency, np.float32)])
    return y, cpu


def windows(x: np.ndarray, size: int) -> np.ndarray:
    m = len(x) // size
    return x[: m * size].reshape(m, size)


def erle_db(mic: np.ndarray, out: np.ndarray, far: np.ndarray) -> float:
    """Microphone over output energy, over 20 ms windows where the far end
    is active."""
    size = len(mic) // max(1, len(mic) // 320)
    active = np.mean(windows(far, size) ** 2, axis=1) > 1e-5
    m = np.sum(windows(mic, size)[active] ** 2)
    o = np.sum(windows(out, size)[active] ** 2)
    return float(10 * np.log10(m / max(o, 1e-20)))


def convergence_s(mic, out, far, rate: int, start: int, stop: int) -> float:
    """Seconds from `start` until the 250 ms windowed ERLE is >= 20 dB in
    every window with far-end activity for the next second (inf: never)."""
    size = rate // 4
    ok = []
    for i in range(start, stop - size + 1, size):
        s = slice(i, i + size)
        if np.mean(far[s] ** 2) < 1e-5:
            ok.append(None)
            continue
        ok.append(np.sum(mic[s] ** 2) >= 100 * np.sum(out[s] ** 2))
    for k in range(len(ok)):
        window = [v for v in ok[k : k + 4] if v is not None]
        if len(ok) - k >= 4 and window and all(window):
            return k * size / rate
    return float("inf")


def segmental_snr(clean: np.ndarray, out: np.ndarray, rate: int) -> float:
    size = rate // 50
    c, o = windows(clean, size), windows(out, size)
    power = np.mean(c**2, axis=1)
    active = power > np.max(power) * 1e-3
    err = np.mean((o - c) ** 2, axis=1)
    snr = 10 * np.log10(power[active] / np.maximum(err[active], 1e-20))
    return float(np.mean(np.clip(snr, -10, 35)))


def measure(scene: Scene, out: np.ndarray) -> dict[str, float]:
    r = scene.rate
    a, b = int(scene.t1 * r), int(scene.t2 * r)
    half = a // 2
    return {
        "erle": erle_db(scene.echo[half:a], out[half:a], scene.far[half:a]),
        "conv": convergence_s(scene.echo, out, scene.far, r, 0, a),
        "dt_snr": segmental_snr(scene.clean[a:b], out[a:b], r),
        "reconv": convergence_s(scene.echo, out, scene.far, r, b, len(out)),
        "erle2": erle_db(scene.echo[b + 2 * r :], out[b + 2 * r :], scene.far[b + 2 * r :]),
    }


def header() -> None:
    """When, where and how the run was made, as comment lines."""
    print(
        f"# {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
        f"{platform.machine()}, Python {platform.python_version()}, numpy {np.__version__}, "
        f"audiocore path {_aec._get_path()}, {os.cpu_count()} cores"
    )
    print(f"# {' '.join(sys.argv)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenes", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rate", type=int, default=16000, choices=[8000, 16000, 24000, 48000])
    parser.add_argument("--repeat", type=int, default=3, help="runs per contender for CPU")
    parser.add_argument("--max-delay-ms", type=float, default=300.0)
    parser.add_argument("--max-ppm", type=float, default=100.0, help="clock drift, +-")
    parser.add_argument("--smoke", action="store_true", help="one short scene (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.scenes, args.repeat = 1, 1
    t1, t2, t3 = (4.0, 6.0, 9.0) if args.smoke else (12.0, 18.0, 26.0)
    for tool in ("espeak-ng", "g++", "pkg-config"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is not installed")

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        WebRTC.library = build_webrtc_shim(folder)
        far_speech = speech(FAR_TEXT, "en", args.rate, t3 + 1, folder)
        near_speech = speech(NEAR_TEXT, "en+f3", args.rate, t3 + 1, folder)
        contenders = [Microphone, Ours, OursScalar, Speex, WebRTC, SpeexGiven, WebRTCGiven]
        if args.rate != 16000:
            # Debian's 0.3 refuses these rates through the AudioFrame calls
            # (kBadSampleRateError on the reverse stream).
            contenders = [Microphone, Ours, OursScalar, Speex, SpeexGiven]
            print("# WebRTC: 16 kHz only through this shim; not run")
        header()
        results: dict[str, list[dict[str, float]]] = {c.name: [] for c in contenders}
        for k in range(args.scenes):
            rng = np.random.default_rng(args.seed * 1000 + k)
            scene = make_scene(
                rng,
                args.rate,
                far_speech,
                near_speech,
                t1,
                t2,
                t3,
                args.max_delay_ms,
                args.max_ppm,
                f"{k}",
            )
            print(f"\nscene {k}: {scene.description}")
            print(
                "| contender | ERLE dB | conv s | double-talk segSNR dB | re-conv s "
                "| ERLE after dB | µs / 10 ms |"
            )
            print("|---|---|---|---|---|---|---|")
            for c in contenders:
                cpus = []
                for _ in range(args.repeat):
                    out, cpu = run(c, scene, args.max_delay_ms)
                    cpus.append(cpu)
                m = measure(scene, out)
                m["cpu"] = float(np.median(cpus)) * 1e6
                # Checked after timing: the output is the near end's length
                # and finite.
                assert len(out) == len(scene.near) and np.all(np.isfinite(out))
                results[c.name].append(m)
                print(
                    f"| {c.name} | {m['erle']:.1f} | {m['conv']:.2f} | {m['dt_snr']:.1f} | "
                    f"{m['reconv']:.2f} | {m['erle2']:.1f} | {m['cpu']:.0f} |"
                )
            sys.stdout.flush()
        print(f"\n## Mean over {args.scenes} scenes ({args.rate} Hz)")
        print(
            "| contender | ERLE dB | conv s (median) | double-talk segSNR dB | re-conv s (median) "
            "| ERLE after change dB | µs / 10 ms | CPU / speexdsp |"
        )
        print("|---|---|---|---|---|---|---|---|")
        speex_cpu = np.mean([m["cpu"] for m in results["speexdsp"]])
        for c in contenders:
            rows = results[c.name]
            mean = {key: float(np.mean([m[key] for m in rows])) for key in rows[0]}
            med = {key: float(np.median([m[key] for m in rows])) for key in rows[0]}
            print(
                f"| {c.name} | {mean['erle']:.1f} | {med['conv']:.2f} | {mean['dt_snr']:.1f} | "
                f"{med['reconv']:.2f} | {mean['erle2']:.1f} | {mean['cpu']:.0f} | "
                f"{mean['cpu'] / speex_cpu:.2f} |"
            )


if __name__ == "__main__":
    main()
