"""What the offline model (``audiocore_server/offline/model.py``) does with images: it
describes the ones it is given — dimensions and mean colour, so a test can
tell that the bytes a client sent reached the model — and, on a cue ("draw
me a red square"), returns a small PNG of its own, so the way out is tested
end to end. Pillow decodes and encodes (PNG, JPEG, WebP).
"""

from __future__ import annotations

import io
import re

from google.genai import types
from PIL import Image, ImageDraw, ImageStat

# Past this many pixels an image is not looked at: decoding 2 MiB of PNG
# could otherwise take a gigabyte (a decompression bomb).
MAX_PIXELS = 4096 * 4096
DRAWING_SIZE = 64  # a drawing is this many pixels square

COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 30, 40),
    "green": (30, 160, 60),
    "blue": (40, 80, 220),
    "yellow": (240, 200, 20),
    "black": (0, 0, 0),
    "white": (255, 255, 255),
}
_DRAW = re.compile(rf"\bdraw (?:me )?an? ({'|'.join(COLOURS)}) (square|circle)\b", re.I)


def describe(media_type: str, data: bytes) -> str:
    """``a 64x48 image/png, mean colour #dc1e28``: what the model saw."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            width, height = image.size
            if width * height > MAX_PIXELS:
                return f"a {width}x{height} {media_type}, too large to look at"
            mean = ImageStat.Stat(image.convert("RGB")).mean
    except (OSError, ValueError, Image.DecompressionBombError):
        return f"{len(data)} bytes of {media_type} that do not decode"
    red, green, blue = (round(c) for c in mean)
    return f"a {width}x{height} {media_type}, mean colour #{red:02x}{green:02x}{blue:02x}"


def describe_all(descriptions: list[str]) -> str:
    """One sentence for the images given in a turn."""
    count = "an image" if len(descriptions) == 1 else f"{len(descriptions)} images"
    return f"I see {count}: {'; '.join(descriptions)}."


def drawing(text: str) -> tuple[str, types.Part] | None:
    """For a drawing cue: what the model says, and the PNG it returns."""
    match = _DRAW.search(text)
    if match is None:
        return None
    colour, shape = match[1].lower(), match[2].lower()
    size = DRAWING_SIZE
    image = Image.new("RGB", (size, size), (255, 255, 255))
    if shape == "square":
        image.paste(COLOURS[colour], (0, 0, size, size))
    else:
        ImageDraw.Draw(image).ellipse((0, 0, size - 1, size - 1), fill=COLOURS[colour])
    out = io.BytesIO()
    image.save(out, format="PNG")
    part = types.Part(inline_data=types.Blob(mime_type="image/png", data=out.getvalue()))
    return f"Here is a {colour} {shape}.", part
