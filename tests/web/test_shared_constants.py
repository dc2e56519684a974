"""What the server and the page must agree on, read on both sides.

Each value is written twice (once in ``audiocore_server/``, once in ``web/``), so a
change on one side alone must fail here. The server's side is imported; the
page's is read by node importing the page's own modules (``PAGE`` below), and
the client messages are the ones ``LiveSession`` really sends to a fake
socket, decoded by the server's own ``protocol.decode_text``.
"""

from __future__ import annotations

import base64
import functools
import json
import math
import shutil
import subprocess
from typing import Any

from web_helpers import ROOT, missing

from audiocore_server.audio import voice
from audiocore_server.settings import Settings
from audiocore_server.tasks import acp_permissions, records
from audiocore_server.wire import fields, protocol
from audiocore_server.wire.chat_messages import ChatSubmit

# node prints one JSON object: the page's constants, what its functions say
# of the server's close codes, and the frames a LiveSession sends.
PAGE = """
import { IMAGE_TYPES, MAX_IMAGE_BYTES } from "./web/images.js";
import { reconnectable } from "./web/sdk/reconnect.js";
import { LiveSession, SUPPORTED_RATES } from "./web/sdk/session.js";
import { TASK_STATES, VOICE_DBFS, VOICE_RMS, turnDetectionFor } from "./web/state.js";
import { MAX_PERMISSION_TITLE_CHARS, TASK_STATUSES } from "./web/task-card.js";

const { closeCodes } = JSON.parse(process.argv[1]);

class FakeSocket {
  constructor() { this.frames = []; this.readyState = 0; this.bufferedAmount = 0; }
  send(data) {
    this.frames.push(typeof data === "string"
      ? { text: data }
      : { binary: Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString("base64") });
  }
  close() { this.readyState = 3; }
}

// Every message a LiveSession sends, after the `start` of each turn-taking
// mode and input format the page offers.
const sessions = [];
for (const mode of ["hands-free", "push-to-talk"]) {
  for (const inputFormat of ["f32", "s16"]) {
    let socket;
    const live = new LiveSession("ws://x/ws", {
      inputRate: 48000, inputFormat, outputRate: 48000, sessionId: "s1",
      turnDetection: turnDetectionFor(mode), userKey: "k".repeat(32), timeZone: "Europe/Paris",
      echoCancellation: mode === "hands-free" ? "server" : undefined,
      WebSocketImpl: class extends FakeSocket { constructor() { super(); socket = this; } },
    });
    live.open();
    socket.readyState = 1;
    socket.onopen();
    live.sendAudio(new Float32Array([0, 0.5, -0.5, 1]));
    live.sendText("hello");
    live.sendImage({ mediaType: "image/png", data: "iVBORw0KGgo=" });
    live.activityStart();
    live.activityEnd();
    live.interrupt();
    live.toolApproval("a1", true, "fine");
    live.toolResult("c1", { output: { ok: 1 } });
    live.toolResult("c2", { errorText: "denied" });
    live.cancelTask("t1");
    live.sendChatMessages([{ id: "m1", role: "user", parts: [{ type: "text", text: "hi" }] }]);
    sessions.push({ mode, inputFormat, frames: socket.frames });
  }
}

console.log(JSON.stringify({
  SUPPORTED_RATES, VOICE_DBFS, VOICE_RMS, IMAGE_TYPES, MAX_IMAGE_BYTES,
  MAX_PERMISSION_TITLE_CHARS,
  TASK_STATES: Object.keys(TASK_STATES), TASK_STATUSES: Object.keys(TASK_STATUSES),
  reconnects: Object.fromEntries(
    closeCodes.map((code) => [code, reconnectable({ code, opened: true })]),
  ),
  turnDetections: ["hands-free", "push-to-talk"].map(turnDetectionFor),
  sessions,
}));
"""

# The server's close codes (audiocore_server/wire/protocol.py), and those after which it
# keeps the session for the client to come back (docs/protocol.md,
# "Reconnecting"): it failed (1011), or the session is still held (1013).
SERVER_CLOSE_CODES = {
    name: value
    for name, value in vars(protocol).items()
    if name.startswith("CLOSE_") and isinstance(value, int)
}
COME_BACK = {protocol.CLOSE_INTERNAL_ERROR, protocol.CLOSE_TRY_AGAIN_LATER}


@functools.cache
def page() -> dict[str, Any]:
    node = shutil.which("node")
    if node is None:
        missing("node is not installed (Debian package nodejs)")
    argv = json.dumps({"closeCodes": sorted(SERVER_CLOSE_CODES.values())})
    result = subprocess.run(
        [node, "--input-type=module", "-e", PAGE, argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_sample_rates() -> None:
    assert page()["SUPPORTED_RATES"] == list(fields.SUPPORTED_RATES)


def test_voice_threshold() -> None:
    # The page shows "speaking" (and cuts the agent off) from the level at
    # which the server's voice check, and so the offline model, hears speech.
    assert page()["VOICE_DBFS"] == voice.VOICE_DBFS
    assert math.isclose(page()["VOICE_RMS"] * 32768, voice.voiced.rms, rel_tol=1e-12)


def test_task_states() -> None:
    assert sorted(page()["TASK_STATES"]) == sorted(records.TASK_STATES)
    # A card's status is a state, or "processing" for queued and running.
    assert sorted(page()["TASK_STATUSES"]) == sorted([*records.TASK_STATES, "processing"])


def test_image_limits() -> None:
    assert page()["IMAGE_TYPES"] == list(fields.IMAGE_TYPES)
    # The page refuses what the server would (its default limit).
    assert (
        page()["MAX_IMAGE_BYTES"] == Settings().max_image_bytes == fields.Limits().max_image_bytes
    )


def test_permission_title_bound() -> None:
    assert page()["MAX_PERMISSION_TITLE_CHARS"] == acp_permissions.MAX_TITLE_CHARS


def test_close_codes_the_page_reconnects_after() -> None:
    reconnects = {int(code): again for code, again in page()["reconnects"].items()}
    assert reconnects == {code: code in COME_BACK for code in SERVER_CLOSE_CODES.values()}


def test_turn_detection_modes() -> None:
    assert sorted(page()["turnDetections"]) == sorted(protocol.TURN_DETECTION)


def test_every_message_the_page_sends_decodes_on_the_server() -> None:
    limits = fields.Limits()
    expected = [
        protocol.Start,
        protocol.Audio,
        protocol.Text,
        fields.Image,
        protocol.ActivityStart,
        protocol.ActivityEnd,
        protocol.Interrupt,
        fields.ToolApproval,
        fields.ToolResult,
        fields.ToolResult,
        protocol.TaskCancel,
        ChatSubmit,
    ]
    sessions = page()["sessions"]
    assert [(s["mode"], s["inputFormat"]) for s in sessions] == [
        ("hands-free", "f32"),
        ("hands-free", "s16"),
        ("push-to-talk", "f32"),
        ("push-to-talk", "s16"),
    ]
    for session in sessions:
        frames = session["frames"]
        start = protocol.decode_text(frames[0]["text"], protocol.InputFormat(), limits)
        assert isinstance(start, protocol.Start)
        assert start.input == protocol.InputFormat(48_000, session["inputFormat"], 1)
        assert start.turn_detection == ("manual" if session["mode"] == "push-to-talk" else "server")
        # The page's setting "echo cancellation in the server", on in one mode here.
        assert start.echo_cancellation == (
            "server" if session["mode"] == "hands-free" else "client"
        )
        decoded: list[object] = [start]
        for frame in frames[1:]:
            if "binary" in frame:
                audio = protocol.decode_binary(
                    base64.b64decode(frame["binary"]), start.input, limits
                )
                assert len(audio.data) == 4 * start.input.frame_bytes  # the four samples sent
                decoded.append(audio)
            else:
                decoded.append(protocol.decode_text(frame["text"], start.input, limits))
        assert [type(m) for m in decoded] == expected, session
