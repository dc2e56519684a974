"""The sample rate an audio mime type names (``audio/pcm;rate=16000``): one
reading for the model's output, ``/run_live``'s blobs and the providers."""

from __future__ import annotations

import re

_RATE = re.compile(r"rate=0*(\d+)")
# No sample rate has more digits.  A longer run (a client's mime type may
# hold thousands, past int()'s 4300-digit limit and its ValueError) is
# refused before int() sees it.
_RATE_DIGITS = 9


def audio_rate(mime_type: str | None, default: int = 24_000) -> int:
    """The rate a mime type names (``audio/pcm;rate=16000``), else `default`;
    ``ValueError`` for a rate of more than nine digits."""
    match = _RATE.search(mime_type or "")
    if match is None:
        return default
    digits = match.group(1)
    if len(digits) > _RATE_DIGITS:
        raise ValueError(f"audio rate of {len(digits)} digits is not a sample rate")
    return int(digits)
