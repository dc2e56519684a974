"""The G.711 contenders, shared by compare_g711.py's tables: the codec per
20 ms frame, and the phone paths (8 kHz G.711 <-> a model's rate) as other
voice frameworks build them, from audioop and soxr.

Each case is built outside the timed region and returns a zero-argument
callable plus a function that extracts comparable bytes from its result.
"""

import os
import sys
import warnings

import numpy as np

import audiocore

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "core"))
from g711_reference import audioop, decode_table, encode  # noqa: E402

try:
    import soxr
except ImportError:  # pragma: no cover
    soxr = None

warnings.filterwarnings("ignore", category=DeprecationWarning)  # audioop

FRAME = 160  # 20 ms at 8 kHz, what Twilio sends every 20 ms
SIZES = (FRAME, 1_000_000)
LAWS = ("ulaw", "alaw")
ENCODE = {"ulaw": audiocore.pcm16_to_ulaw, "alaw": audiocore.pcm16_to_alaw}
ENCODE_F32 = {"ulaw": audiocore.float32_to_ulaw, "alaw": audiocore.float32_to_alaw}
DECODE = {"ulaw": audiocore.ulaw_to_pcm16, "alaw": audiocore.alaw_to_pcm16}
DECODE_F32 = {"ulaw": audiocore.ulaw_to_float32, "alaw": audiocore.alaw_to_float32}


def speech_pcm16(n, seed=3):
    """PCM16 at speech levels: noise shaped towards low frequencies."""
    rng = np.random.default_rng(seed)
    x = np.cumsum(rng.standard_normal(n)) * 0.02
    x -= np.convolve(x, np.ones(64) / 64, mode="same")
    return np.rint(np.clip(x * 0.3, -1, 1) * 32767).astype("<i2")


def numpy_tables(law):
    """The fastest plain NumPy: a 64 Ki-entry encoding table indexed by the
    sample's bits, and the 256-entry decoding table."""
    every = np.arange(-32768, 32768, dtype=np.int16)
    by_bits = np.empty(65536, np.uint8)
    by_bits[every.view(np.uint16)] = np.frombuffer(encode(law, every), np.uint8)
    return by_bits, decode_table(law).astype("<i2")


def encode_cases(law, n):
    """name -> (call, result as codes)."""
    pcm = speech_pcm16(n)
    raw = pcm.tobytes()
    out = np.empty(n, np.uint8)
    by_bits, _ = numpy_tables(law)
    bits = pcm.view(np.uint16)
    cases = {
        "audiocore": (lambda: ENCODE[law](raw), bytes),
        "audiocore out=": (lambda: ENCODE[law](raw, out), lambda _: out.tobytes()),
        "numpy table": (lambda: by_bits[bits], lambda r: r.tobytes()),
        "numpy formula": (lambda: encode(law, pcm), bytes),
    }
    if audioop is not None:
        lin2 = audioop.lin2ulaw if law == "ulaw" else audioop.lin2alaw
        cases["audioop"] = (lambda: lin2(raw, 2), bytes)
    return cases


def decode_cases(law, n):
    codes = encode(law, speech_pcm16(n))
    out = np.empty(n, np.int16)
    _, table = numpy_tables(law)
    index = np.frombuffer(codes, np.uint8)
    cases = {
        "audiocore": (lambda: DECODE[law](codes), bytes),
        "audiocore out=": (lambda: DECODE[law](codes, out), lambda _: out.tobytes()),
        "numpy table": (lambda: table[index], lambda r: r.tobytes()),
        "numpy formula": (
            lambda: decode_table(law)[np.frombuffer(codes, np.uint8)],
            lambda r: r.tobytes(),
        ),
    }
    if audioop is not None:
        to_lin = audioop.ulaw2lin if law == "ulaw" else audioop.alaw2lin
        cases["audioop"] = (lambda: to_lin(codes, 2), bytes)
    return cases


def float_cases(law, n):
    """float32 in and out, against the two-step conversion through PCM16."""
    x = speech_pcm16(n).astype(np.float32) / np.float32(32768)
    codes = encode(law, speech_pcm16(n))
    return {
        f"float32→{law}": (
            lambda: ENCODE_F32[law](x),
            lambda: ENCODE[law](audiocore.float32_to_pcm16(x)),
        ),
        f"{law}→float32": (
            lambda: DECODE_F32[law](codes),
            lambda: audiocore.pcm16_to_float32(DECODE[law](codes)),
        ),
    }


# ---- the phone paths ------------------------------------------------------------


class Fused:
    """audiocore: one Resampler reads or writes G.711 itself."""

    def __init__(self, in_rate, out_rate, input, output):
        self.process = audiocore.Resampler(in_rate, out_rate, input=input, output=output).process


class AudioopSoxr:
    """What voice frameworks do: audioop for the codec, a soxr stream
    (int16 in and out) for the rate, NumPy between them.  Pipecat's
    SOXRStreamAudioResampler is this at quality VHQ, astype included."""

    def __init__(self, in_rate, out_rate, input, output, quality="VHQ"):
        stream = soxr.ResampleStream(in_rate, out_rate, 1, dtype="int16", quality=quality)
        resample = stream.resample_chunk

        def to_pcm16(pcm):
            return resample(np.frombuffer(pcm, np.int16)).astype(np.int16).tobytes()

        if input == "ulaw":
            ulaw2lin = audioop.ulaw2lin
            self.process = lambda codes: to_pcm16(ulaw2lin(codes, 2))
        else:
            lin2ulaw = audioop.lin2ulaw
            self.process = lambda pcm: lin2ulaw(to_pcm16(pcm), 2)


# (name, in_rate, out_rate, input, output): into the model and back.
PHONE_PATHS = [
    ("8k μ-law → 16k PCM16", 8000, 16000, "ulaw", "s16"),
    ("8k μ-law → 24k PCM16", 8000, 24000, "ulaw", "s16"),
    ("24k PCM16 → 8k μ-law", 24000, 8000, "s16", "ulaw"),
    ("16k PCM16 → 8k μ-law", 16000, 8000, "s16", "ulaw"),
]


def phone_contenders(in_rate, out_rate, input, output):
    """name -> factory of a fresh stream with a process(chunk) -> bytes."""
    found = {"audiocore fused": lambda: Fused(in_rate, out_rate, input, output)}
    if soxr is not None and audioop is not None:
        found["audioop + soxr VHQ"] = lambda: AudioopSoxr(in_rate, out_rate, input, output)
        found["audioop + soxr HQ"] = lambda: AudioopSoxr(in_rate, out_rate, input, output, "HQ")
    return found


def phone_input(in_rate, input, frames):
    pcm = speech_pcm16(frames)
    return encode("ulaw", pcm) if input == "ulaw" else pcm.tobytes()


def phone_chunks(in_rate, input, chunks):
    """`chunks` consecutive 20 ms chunks of one signal (codes or PCM16)."""
    size = in_rate // 50
    data = phone_input(in_rate, input, size * chunks)
    width = 1 if input == "ulaw" else 2
    return [data[i * size * width : (i + 1) * size * width] for i in range(chunks)]
