"""audiocore: a compiled audio DSP core for real-time voice agents.

PCM conversion, G.711, streaming resampling, jitter/playout buffering,
acoustic echo cancellation and WAV framing, zero-copy on any buffer.
Formats: "s16" is signed 16-bit little-endian PCM (the wire format), "f32"
is float32 in [-1, 1] (the compute format), "ulaw" and "alaw" are G.711
codes, one byte a sample (the phone network's).  PCM16 and G.711 output
is `bytes`, float32 output a numpy float32 array.

Limits, the same in every function: interleaved audio has 1 to
`MAX_CHANNELS` (64) channels; sample rates are 1 Hz to `MAX_SAMPLE_RATE`
(1 MHz; the jitter buffer needs at least 1 kHz).
"""

import os as _os
import warnings as _warnings

from audiocore._convert import (
    MAX_CHANNELS,
    alaw_to_float32,
    alaw_to_pcm16,
    float32_to_alaw,
    float32_to_pcm16,
    float32_to_ulaw,
    pcm16_to_alaw,
    pcm16_to_float32,
    pcm16_to_ulaw,
    ulaw_to_float32,
    ulaw_to_pcm16,
)
from audiocore._validate import MAX_SAMPLE_RATE
from audiocore.aec import EchoCanceller
from audiocore.jitter import JitterBuffer
from audiocore.resample import Resampler, resample
from audiocore.wav import WavInfo, read_wav, to_wav, wav_header

__all__ = [
    "MAX_CHANNELS",
    "MAX_SAMPLE_RATE",
    "EchoCanceller",
    "JitterBuffer",
    "Resampler",
    "WavInfo",
    "alaw_to_float32",
    "alaw_to_pcm16",
    "float32_to_alaw",
    "float32_to_pcm16",
    "float32_to_ulaw",
    "pcm16_to_alaw",
    "pcm16_to_float32",
    "pcm16_to_ulaw",
    "read_wav",
    "resample",
    "to_wav",
    "ulaw_to_float32",
    "ulaw_to_pcm16",
    "wav_header",
]

__version__ = "0.1.0"

_SIMD_PATHS = ("scalar", "sse2", "avx2", "avx512", "neon")
if _os.environ.get("AUDIOCORE_SIMD", "") not in ("", *_SIMD_PATHS):
    # The kernels ignore a value they do not know; say so instead of silently.
    _warnings.warn(
        f"AUDIOCORE_SIMD={_os.environ['AUDIOCORE_SIMD']!r} is not one of {_SIMD_PATHS}; "
        "using the widest path this CPU supports",
        RuntimeWarning,
        stacklevel=2,
    )
