"""A client's read is parsed a slice per turn of the loop (audiocore_server/gate/http_limits.py):
a turn whose every frame arrives in one burst of bytes — far more than one
slice, more than one read — still reaches the model whole and in order."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import websockets.sync.client
from websockets.frames import Frame, Opcode

from audiocore_server.app import create_app
from audiocore_server.gate.http_limits import WEBSOCKET_READ_SLICE, BoundedSendWebSockets
from audiocore_server.settings import Settings
from tests.server.server_helpers import uvicorn_thread

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_server_client import (  # noqa: E402
    IN_RATE,
    OUT_FRAME,
    PUSH_TO_TALK_START,
    account_samples,
    exact_echo,
    watermarked,
)


def _masked(opcode: Opcode, data: bytes) -> bytes:
    return Frame(opcode, data).serialize(mask=True, extensions=[])  # a client's frames are masked


def test_a_turn_sent_in_one_burst_is_echoed_exactly(tmp_path, monkeypatch):
    slices = []
    parse_slice = BoundedSendWebSockets._parse_slice

    def counted(self: BoundedSendWebSockets) -> None:
        slices.append(min(len(self.backlog), WEBSOCKET_READ_SLICE))
        parse_slice(self)

    monkeypatch.setattr(BoundedSendWebSockets, "_parse_slice", counted)

    # 1.5 s of a tone burst, 48 kHz float32 in 20 ms frames: 288 kB.
    t = np.arange(IN_RATE * 3 // 2) / IN_RATE
    tone = np.where((t > 0.3) & (t < 1.2), 0.5 * np.sin(2 * np.pi * 330 * t), 0.0)
    speech = watermarked(tone.astype(np.float32), 1, 1)
    step = IN_RATE // 50
    burst = b"".join(
        [
            _masked(Opcode.TEXT, b'{"type":"activity_start"}'),
            *(
                _masked(Opcode.BINARY, speech[i : i + step].tobytes())
                for i in range(0, len(speech), step)
            ),
            _masked(Opcode.TEXT, b'{"type":"activity_end"}'),
        ]
    )
    expected = exact_echo(speech)
    expected += bytes(-len(expected) % (2 * OUT_FRAME))

    settings = Settings(data_dir=tmp_path, allowed_hosts=("127.0.0.1",))
    with (
        uvicorn_thread(create_app(settings), log_level="warning", ws=BoundedSendWebSockets) as (
            host,
            port,
        ),
        websockets.sync.client.connect(
            f"ws://{host}:{port}/ws", compression=None, max_size=None
        ) as ws,
    ):
        ws.send(PUSH_TO_TALK_START)
        assert json.loads(ws.recv())["type"] == "data-session"
        ws.socket.sendall(burst)  # one write: the server reads it in large pieces
        received = []
        while True:
            message = ws.recv(timeout=30)
            if isinstance(message, bytes):
                received.append(message)
            elif json.loads(message)["type"] in ("finish", "error"):
                assert json.loads(message)["type"] == "finish", message
                break

    assert len(burst) > 8 * WEBSOCKET_READ_SLICE
    assert len(slices) > 1 and max(slices) == WEBSOCKET_READ_SLICE  # the burst was sliced
    account = account_samples(b"".join(received), expected)
    assert account.exact, account
