"""Images both ways, on every surface: an image a client sends reaches the
model (the offline model describes its dimensions and mean colour, which
each test computes from the pixels it made), and an image the model returns
reaches the client as AI SDK's ``file`` chunk. Bounds: size, the bytes'
signature against the declared type, images in one message, the rate.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import urllib.request
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
import websockets
from PIL import Image
from server_helpers import receive_until, start
from starlette.testclient import TestClient
from test_http_chat import chunks, post
from test_seed_dialect import SeedStream, send, submit

from audiocore_server import Settings, create_app
from audiocore_server.offline.images import COLOURS, DRAWING_SIZE, MAX_PIXELS, describe
from audiocore_server.wire.fields import Limits

RNG_SEED = 21


def pixels(width: int = 30, height: int = 20, seed: int = RNG_SEED) -> np.ndarray:
    """Random RGB pixels (seeded): a mean no constant guess would hit."""
    return np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)


def encode(array: np.ndarray, fmt: str) -> bytes:
    out = io.BytesIO()
    Image.fromarray(array, "RGB").save(
        out, format=fmt, **({"lossless": True} if fmt == "WEBP" else {})
    )
    return out.getvalue()


def described(array: np.ndarray, media_type: str) -> str:
    """What the model must say it saw: computed here from the pixels."""
    height, width = array.shape[:2]
    red, green, blue = (round(float(c)) for c in array.reshape(-1, 3).mean(axis=0))
    return f"a {width}x{height} {media_type}, mean colour #{red:02x}{green:02x}{blue:02x}"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def file_part(data: bytes, media_type: str) -> dict[str, Any]:
    return {"type": "file", "mediaType": media_type, "url": f"data:{media_type};base64,{b64(data)}"}


def user_with(parts: list[dict[str, Any]], msg_id: str = "u1") -> dict[str, Any]:
    return {"id": msg_id, "role": "user", "parts": parts}


def said(got: list[dict[str, Any]]) -> str:
    return "".join(m["delta"] for m in got if m["type"] == "text-delta")


def errors(got: list[dict[str, Any]]) -> list[str]:
    return [m["errorText"] for m in got if m["type"] == "error"]


def check_drawing(files: list[dict[str, Any]], colour: str) -> None:
    """One ``file`` chunk: a data URL of the PNG the model drew."""
    assert len(files) == 1 and set(files[0]) == {"type", "url", "mediaType"}
    assert files[0]["mediaType"] == "image/png"
    prefix = "data:image/png;base64,"
    assert files[0]["url"].startswith(prefix)
    png = base64.b64decode(files[0]["url"][len(prefix) :], validate=True)
    with Image.open(io.BytesIO(png)) as image:
        assert image.format == "PNG" and image.size == (DRAWING_SIZE, DRAWING_SIZE)
        drawn = np.asarray(image.convert("RGB")).reshape(-1, 3)
    assert {tuple(int(c) for c in p) for p in np.unique(drawn, axis=0)} == {COLOURS[colour]}


# ---------------------------------------------------------------- the offline model


def test_offline_model_describes_what_it_cannot_decode_or_will_not() -> None:
    """A JPEG signature over junk does not decode; a small file of many pixels
    (a decompression bomb's shape) is not decoded at all."""
    junk = b"\xff\xd8\xff" + bytes(64)
    assert describe("image/jpeg", junk) == "67 bytes of image/jpeg that do not decode"
    out = io.BytesIO()
    Image.new("1", (5000, 4000)).save(out, format="PNG")
    assert len(out.getvalue()) < 100_000 and MAX_PIXELS < 5000 * 4000
    assert describe("image/png", out.getvalue()) == "a 5000x4000 image/png, too large to look at"


# ---------------------------------------------------------------- /ws


@pytest.mark.parametrize(("fmt", "media_type"), [("PNG", "image/png"), ("WEBP", "image/webp")])
def test_ws_image_message_reaches_the_model(client: TestClient, fmt: str, media_type: str) -> None:
    array = pixels()
    with client.websocket_connect("/ws") as ws:
        start(ws, turnDetection="manual")
        image = {"type": "image", "mediaType": media_type, "data": b64(encode(array, fmt))}
        ws.send_text(json.dumps(image))
        ws.send_text(json.dumps({"type": "text", "text": "what is this"}))
        got = receive_until(ws, "finish")
    assert not errors(got)
    assert said(got) == f"I see an image: {described(array, media_type)}. You said: what is this"


def test_ws_jpeg_camera_frame_mean_within_the_codec_error(client: TestClient) -> None:
    """JPEG is lossy: the colour the model sees is the frame's, within a few levels."""
    array = np.zeros((48, 64, 3), np.uint8)
    array[:, :] = (180, 90, 30)
    with client.websocket_connect("/ws") as ws:
        start(ws, turnDetection="manual")
        frame = {"type": "image", "mediaType": "image/jpeg", "data": b64(encode(array, "JPEG"))}
        ws.send_text(json.dumps(frame))
        ws.send_text(json.dumps({"type": "text", "text": "and now"}))
        text = said(receive_until(ws, "finish"))
    assert text.startswith("I see an image: a 64x48 image/jpeg, mean colour #")
    colour = text.split("#")[1][:6]
    seen = [int(colour[i : i + 2], 16) for i in (0, 2, 4)]
    assert all(abs(a - b) <= 3 for a, b in zip(seen, (180, 90, 30), strict=True)), seen


def test_ws_message_file_parts_reach_the_model(client: TestClient) -> None:
    one, two = pixels(seed=1), pixels(12, 9, seed=2)
    parts = [
        file_part(encode(one, "PNG"), "image/png"),
        file_part(encode(two, "PNG"), "image/png"),
        {"type": "text", "text": "compare them"},
    ]
    with client.websocket_connect("/ws") as ws:
        start(ws, turnDetection="manual")
        ws.send_text(json.dumps({"type": "message", "messages": [user_with(parts)]}))
        got = receive_until(ws, "finish")
    assert not errors(got)
    assert said(got) == (
        f"I see 2 images: {described(one, 'image/png')}; {described(two, 'image/png')}. "
        "You said: compare them"
    )


def test_ws_drawing_comes_back_as_a_file_chunk(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        start(ws, turnDetection="manual")
        ws.send_text(json.dumps({"type": "text", "text": "draw me a red square"}))
        got = receive_until(ws, "finish")
    assert said(got) == "Here is a red square."
    check_drawing([m for m in got if m["type"] == "file"], "red")
    kinds = [m["type"] for m in got]
    assert kinds.index("text-end") < kinds.index("file") < kinds.index("finish")


def _refused_then_alive(ws: Any, frame: dict[str, Any]) -> str:
    """The error a frame gets; then a text turn is still answered."""
    ws.send_text(json.dumps(frame))
    error = ws.receive_json()
    assert error["type"] == "error", error
    ws.send_text(json.dumps({"type": "text", "text": "still there"}))
    got = receive_until(ws, "finish")
    assert said(got).startswith("You said: still there") and not errors(got)
    return str(error["errorText"])


def test_ws_bounds_are_clear_errors_and_the_socket_stays(settings: Settings) -> None:
    png = encode(pixels(), "PNG")
    jpeg = encode(pixels(), "JPEG")
    small = replace(settings, max_image_bytes=len(png) - 1)
    with TestClient(create_app(small)) as client, client.websocket_connect("/ws") as ws:
        start(ws, turnDetection="manual")
        too_big = _refused_then_alive(
            ws, {"type": "image", "mediaType": "image/png", "data": b64(png)}
        )
        assert too_big == f"image: {len(png)} bytes exceeds the limit of {len(png) - 1}"
        liar = _refused_then_alive(
            ws, {"type": "image", "mediaType": "image/png", "data": b64(jpeg)}
        )
        assert liar == "image: declared image/png, but its bytes begin with those of image/jpeg"
        junk = _refused_then_alive(
            ws, {"type": "image", "mediaType": "image/webp", "data": b64(b"RIFF\0\0\0\0WAVEfmt ")}
        )
        assert (
            junk
            == "image: declared image/webp, but its bytes begin with no PNG, JPEG or WebP signature"
        )
        gif = _refused_then_alive(
            ws, {"type": "image", "mediaType": "image/gif", "data": b64(b"GIF89a")}
        )
        assert gif.startswith(
            "image: mediaType must be one of ['image/jpeg', 'image/png', 'image/webp']"
        )
        tiny = encode(pixels(2, 2), "PNG")
        crowd = [file_part(tiny, "image/png")] * (Limits.max_message_images + 1)
        many = _refused_then_alive(
            ws,
            {"type": "message", "messages": [user_with([*crowd, {"type": "text", "text": "x"}])]},
        )
        limit = Limits.max_message_images
        assert many == f"message: {limit + 1} images exceeds the limit of {limit}"


def test_ws_images_past_their_rate_are_dropped_with_one_error(client: TestClient) -> None:
    """A camera faster than the image rate (2 a second, 10 at once): frames past
    the burst are dropped, told once; the conversation goes on. 60 frames sent
    back to back outrun the refill however slow this machine is (it would
    have to take 25 s to send them)."""
    frame = {"type": "image", "mediaType": "image/png", "data": b64(encode(pixels(4, 4), "PNG"))}
    with client.websocket_connect("/ws") as ws:
        start(ws, turnDetection="manual")
        for _ in range(60):
            ws.send_text(json.dumps(frame))
        ws.send_text(json.dumps({"type": "text", "text": "enough"}))
        got = receive_until(ws, "finish")
    assert errors(got) == ["too many images: dropped until the rate falls"]
    # The model kept the last four frames it was given.
    assert said(got).startswith("I see 4 images: a 4x4 image/png")


# ---------------------------------------------------------------- /live


def test_live_seed_experimental_attachments_reach_the_model(client: TestClient) -> None:
    """Seed 000's shape: text and ``{type: "image", data, media_type}`` in
    ``experimental_attachments``, ``content`` empty."""
    array = pixels(17, 11)
    message = {
        "id": "u1",
        "role": "user",
        "content": "",
        "experimental_attachments": [
            {"type": "text", "text": "この画像には何が写っていますか？"},
            {"type": "image", "data": b64(encode(array, "PNG")), "media_type": "image/png"},
        ],
    }
    with client.websocket_connect("/live") as ws:
        stream = SeedStream(ws)
        submit(ws, [message])
        got = stream.read()
    assert not errors(got)
    question = message["experimental_attachments"][0]["text"]
    assert said(got) == f"I see an image: {described(array, 'image/png')}. You said: {question}"


def test_live_file_parts_in_and_drawing_out(client: TestClient) -> None:
    """The seed's current client: AI SDK file parts (``sendMessage({text, files})``)."""
    array = pixels(seed=5)
    with client.websocket_connect("/live") as ws:
        stream = SeedStream(ws)
        parts = [file_part(encode(array, "WEBP"), "image/webp"), {"type": "text", "text": "hm"}]
        submit(ws, [user_with(parts)])
        seen = stream.read()
        submit(
            ws,
            [user_with(parts), user_with([{"type": "text", "text": "draw a blue circle"}], "u2")],
        )
        drawn = stream.read()
    assert said(seen) == f"I see an image: {described(array, 'image/webp')}. You said: hm"
    assert said(drawn) == "Here is a blue circle."
    files = [c for c in drawn if c["type"] == "file"]
    assert len(files) == 1 and files[0]["url"].startswith("data:image/png;base64,")


def test_live_bounds_are_error_events_and_the_socket_stays(client: TestClient) -> None:
    jpeg = encode(pixels(), "JPEG")
    with client.websocket_connect("/live") as ws:
        stream = SeedStream(ws)
        liar = file_part(jpeg, "image/jpeg") | {
            "mediaType": "image/png",
            "url": "data:image/png;base64," + b64(jpeg),
        }
        submit(ws, [user_with([liar, {"type": "text", "text": "what is it"}])])
        frame = ws.receive_text()
        assert frame.startswith("data: ")
        error = json.loads(frame[len("data: ") :])
        assert error == {
            "type": "error",
            "errorText": "image: declared image/png, but its bytes begin with those of image/jpeg",
        }
        submit(ws, [user_with([{"type": "text", "text": "fine"}])])
        assert said(stream.read()) == "You said: fine"


def _live_error(ws: Any) -> str:
    """The next frame: an ``error`` event, as the seed's client reads it."""
    frame = ws.receive_text()
    assert frame.startswith("data: ") and frame.endswith("\n\n"), frame
    error = json.loads(frame[len("data: ") :])
    assert error["type"] == "error", error
    return str(error["errorText"])


def test_live_size_count_and_rate_bounds(settings: Settings) -> None:
    png = encode(pixels(), "PNG")
    small = replace(settings, max_image_bytes=len(png) - 1)
    tiny = encode(pixels(2, 2), "PNG")
    limit = Limits.max_message_images
    with TestClient(create_app(small)) as client, client.websocket_connect("/live") as ws:
        stream = SeedStream(ws)
        submit(ws, [user_with([file_part(png, "image/png"), {"type": "text", "text": "x"}])])
        assert _live_error(ws) == f"image: {len(png)} bytes exceeds the limit of {len(png) - 1}"
        crowd = [file_part(tiny, "image/png")] * (limit + 1)
        submit(ws, [user_with([*crowd, {"type": "text", "text": "x"}])])
        assert _live_error(ws) == f"message: {limit + 1} images exceeds the limit of {limit}"
        # Past the rate (a burst of 10, 2 a second): 60 at once outrun the refill.
        for _ in range(60):
            send(ws, {"type": "image", "mediaType": "image/png", "data": b64(tiny)})
        submit(ws, [user_with([{"type": "text", "text": "still here"}])])
        got = stream.read()
    assert errors(got) == ["too many images: dropped until the rate falls"]
    assert said(got).startswith("I see 4 images: a 2x2 image/png")
    assert said(got).endswith("You said: still here")


# ---------------------------------------------------------------- HTTP chat


def test_http_chat_file_part_in_and_drawing_out(client: TestClient) -> None:
    array = pixels(seed=8)
    parts = [file_part(encode(array, "PNG"), "image/png"), {"type": "text", "text": "describe"}]
    got = chunks(post(client, "img-1", [user_with(parts)]))
    assert said(got) == f"I see an image: {described(array, 'image/png')}. You said: describe"
    drawn = chunks(
        post(client, "img-2", [user_with([{"type": "text", "text": "draw me a green square"}])])
    )
    assert said(drawn) == "Here is a green square."
    check_drawing([c for c in drawn if c["type"] == "file"], "green")


def test_http_chat_bounds_are_400(settings: Settings) -> None:
    jpeg = encode(pixels(), "JPEG")
    small = replace(settings, max_image_bytes=len(jpeg) - 1)

    def refused(parts: list[dict[str, Any]]) -> str:
        body = {"id": "img-3", "messages": [user_with([*parts, {"type": "text", "text": "x"}])]}
        answer = client.post("/api/chat", json=body)
        assert answer.status_code == 400, answer.text
        return answer.text

    with TestClient(create_app(small)) as client:
        liar = {
            "type": "file",
            "mediaType": "image/webp",
            "url": "data:image/webp;base64," + b64(encode(pixels(4, 4), "JPEG")),
        }
        assert (
            "image: declared image/webp, but its bytes begin with those of image/jpeg"
            in refused([liar])
        )
        too_big = refused([file_part(jpeg, "image/jpeg")])
        assert f"image: {len(jpeg)} bytes exceeds the limit of {len(jpeg) - 1}" in too_big
        crowd = [file_part(encode(pixels(2, 2), "PNG"), "image/png")] * 5
        assert "message: 5 images exceeds the limit of 4" in refused(crowd)
        # Refused before any model ran: the chat's session still answers.
        answer = chunks(post(client, "img-3", [user_with([{"type": "text", "text": "ok"}])]))
        assert said(answer) == "You said: ok"


# ---------------------------------------------------------------- /run_live


def test_run_live_image_blob_in_and_drawing_out(live_server: str, settings: Settings) -> None:
    """ADK's live protocol: an image blob (bytes checked as on the other
    surfaces), and a model's image as an event's ``inlineData``."""
    base = live_server.removesuffix("/ws").replace("ws://", "http://")
    array = pixels(seed=13)
    app = settings.app_name
    request = urllib.request.Request(
        f"{base}/apps/{app}/users/u1/sessions",
        data=json.dumps({"sessionId": "img-live"}).encode(),
        headers={"content-type": "application/json"},
        method="POST",
    )
    urllib.request.urlopen(request, timeout=10).close()
    url = (
        f"{live_server.removesuffix('/ws')}/run_live?app_name={app}&user_id=u1&session_id=img-live"
    )

    def text_turn(text: str) -> str:
        return json.dumps({"content": {"role": "user", "parts": [{"text": text}]}})

    async def turn(ws: Any) -> list[dict[str, Any]]:
        events = []
        while not (events and events[-1].get("turnComplete")):
            events.append(json.loads(await ws.recv()))
        return events

    async def scenario() -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
        async with websockets.connect(url, max_size=None) as ws:
            liar = {"blob": {"mime_type": "image/webp", "data": b64(encode(array, "PNG"))}}
            await ws.send(json.dumps(liar))
            error = json.loads(await ws.recv())
            png = {"blob": {"mime_type": "image/png", "data": b64(encode(array, "PNG"))}}
            await ws.send(json.dumps(png))
            await ws.send(text_turn("what is it"))
            seen = await turn(ws)
            await ws.send(text_turn("draw me a yellow circle"))
            return error, seen, await turn(ws)

    error, seen, drawn = asyncio.run(scenario())
    assert error["errorCode"] == "INVALID_REQUEST"
    assert (
        "blob: declared image/webp, but its bytes begin with those of image/png"
        in error["errorMessage"]
    )
    words = [
        p["text"] for e in seen for p in (e.get("content") or {}).get("parts", []) if "text" in p
    ]
    assert f"I see an image: {described(array, 'image/png')}. You said: what is it" in words
    images = [
        p["inlineData"]
        for e in drawn
        for p in (e.get("content") or {}).get("parts", [])
        if p.get("inlineData", {}).get("mimeType", "").startswith("image/")
    ]
    assert len(images) == 1 and images[0]["mimeType"] == "image/png"
    png = base64.urlsafe_b64decode(images[0]["data"] + "=" * (-len(images[0]["data"]) % 4))
    with Image.open(io.BytesIO(png)) as image:
        assert image.size == (DRAWING_SIZE, DRAWING_SIZE)
