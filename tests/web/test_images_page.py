"""The demo page's images in Chromium against the real server (offline
model): an attached image shows in the user's message and the model's
description of it (dimensions and mean colour, computed here from the
pixels sent) comes back; a drawing the model returns shows in its message;
the camera (Chromium's fake device) sends JPEG frames the model describes.
Push-to-talk, so the fake microphone's looped speech makes no turns.
"""

from __future__ import annotations

import io
import re

import numpy as np
from PIL import Image
from web_helpers import check_no_page_errors, connect, wait_for


def _png(width: int, height: int) -> tuple[bytes, str]:
    """A PNG of seeded random pixels, and what the model must say of it."""
    array = np.random.default_rng(8).integers(0, 256, (height, width, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(array).save(out, format="PNG")
    red, green, blue = (round(float(c)) for c in array.reshape(-1, 3).mean(axis=0))
    return (
        out.getvalue(),
        f"a {width}x{height} image/png, mean colour #{red:02x}{green:02x}{blue:02x}",
    )


def _agent_text_containing(page, text: str) -> None:
    wait_for(
        page,
        f"[...document.querySelectorAll('#log .entry.agent')].some("
        f"(e) => e.textContent.includes({text!r}))",
    )


def test_attach_an_image_and_see_the_description_then_a_drawing(open_page):
    page = open_page("?mode=push-to-talk")
    connect(page)
    png, seen = _png(24, 16)
    page.set_input_files(
        "#attach", files=[{"name": "x.png", "mimeType": "image/png", "buffer": png}]
    )
    wait_for(page, "!document.getElementById('attached').hidden")
    page.fill("#text", "what is this")
    page.press("#text", "Enter")
    _agent_text_containing(page, f"I see an image: {seen}. You said: what is this")
    user = page.locator("#log .entry.user").last
    assert user.inner_text().startswith("what is this")
    assert user.locator("img").get_attribute("src").startswith("data:image/png;base64,")
    assert page.locator("#attached").is_hidden()  # sent: no longer attached

    page.fill("#text", "draw me a blue square")
    page.press("#text", "Enter")
    _agent_text_containing(page, "Here is a blue square.")
    drawing = page.locator("#log .entry.agent img").last
    assert drawing.get_attribute("src").startswith("data:image/png;base64,")
    wait_for(page, "[...document.querySelectorAll('#log .entry.agent img')].at(-1).complete")
    assert drawing.evaluate("(img) => [img.naturalWidth, img.naturalHeight]") == [64, 64]
    check_no_page_errors(page)


def test_a_file_of_another_type_is_refused_on_the_page(open_page):
    page = open_page("?mode=push-to-talk")
    connect(page)
    gif = b"GIF89a\x01\x00\x01\x00\x00\x00\x00;"
    page.set_input_files(
        "#attach", files=[{"name": "x.gif", "mimeType": "image/gif", "buffer": gif}]
    )
    wait_for(page, "!document.getElementById('message').hidden")
    assert "Only PNG, JPEG or WebP images" in page.inner_text("#message")
    assert page.locator("#attached").is_hidden()
    check_no_page_errors(page)


def test_camera_frames_reach_the_model(open_page):
    """Chromium's fake camera: JPEG frames at a frame a second, scaled to 320
    pixels wide; the model describes the latest it was given."""
    page = open_page("?mode=push-to-talk")
    connect(page)
    page.click("#camera")
    wait_for(page, "Number(document.getElementById('camera').dataset.frames ?? 0) >= 1")
    assert page.get_attribute("#camera", "aria-pressed") == "true"
    width, height = page.evaluate(
        "() => { const v = document.getElementById('camera-preview');"
        " return [v.videoWidth, v.videoHeight]; }"
    )
    scaled = f"320x{round(height * 320 / width)}" if width > 320 else f"{width}x{height}"
    page.fill("#text", "what do you see")
    page.press("#text", "Enter")
    _agent_text_containing(page, "You said: what do you see")
    answer = page.locator("#log .entry.agent").last.inner_text()
    assert re.search(
        rf"I see (an image|\d images): a {scaled} image/jpeg, mean colour #", answer
    ), answer
    page.click("#camera")
    assert page.get_attribute("#camera", "aria-pressed") == "false"
    assert page.locator("#camera-preview").is_hidden()
    check_no_page_errors(page)
