"""Phone calls on loopback: how many concurrent Twilio Media Streams calls
one server keeps at real time on the offline model, what a call costs, how
soon the caller hears an answer and how soon a barge-in clears Twilio's
playback (issue #37's figures; docs/telephony.md).

    python benchmarks/bench_phone.py                       # 1, 10, 25, 50, 100 calls
    python benchmarks/bench_phone.py --calls 50,100,150 --stagger 4
    python benchmarks/bench_phone.py --calls 100 --echo-cancellation off,on
    python benchmarks/bench_phone.py --smoke               # one call

``python -m server`` runs in its own process (uvicorn on 127.0.0.1, the
offline model, ``AUDIOCORE_TWILIO_AUTH_TOKEN`` set), the calls in this one
(uvloop), both on this machine's cores. Each call is a client that speaks
Twilio's messages as documented (the shape of tests/server/phone_helpers.py):
a signed upgrade, ``connected``, ``start``, then a 20 ms μ-law ``media``
frame every 20 ms for the whole call, paced at real time — 0.5 s of
silence (μ-law 0xFF), the espeak-ng utterance, silence until half a second
of the answer has played, the utterance again (the barge-in), silence until
that answer has played — then ``stop``. It plays what it receives in real
time, sends each ``mark`` back once the audio before it has played, and on
``clear`` drops what it holds and sends every pending mark back at once.

Measured:

* **first audio**: the caller's last voiced frame sent → the first
  ``media`` of the answer received. The offline model ends a turn after
  600 ms without voice (its hangover), so that is in it; the server's own
  part is ``audiocore_turn_latency_seconds`` (from the model's end of
  speech), whose samples the server writes here too.
* **clear latency**, client side: the barge-in's first voiced frame sent →
  ``clear`` received; server side (``audiocore_bargein_latency_seconds``,
  docs/observability.md): that frame received → ``clear`` sent.
* **real time**, per call: no frame of an answer late for a listener with
  Twilio's 100 ms of prebuffer (the outbound audio paced without gaps),
  the server's input path never behind (client frame received → handed to
  the model, p99 ≤ 20 ms; no input dropped), the caller's own frames sent
  within 20 ms of their schedule (else the client, not the server, is the
  bottleneck), the barge-in answered by ``clear`` within 100 ms and the
  first answer begun within 100 ms of the model's 600 ms hangover (both
  as the caller sees them), the second answer played to its end, the call
  not dropped. N calls stay real time when every call does.
* **CPU per call**: the server process's CPU time over the calls ÷ calls
  ÷ the calls' duration, in % of one core.

A frame is voiced by the server's own check (``audio/voice.py``: RMS at
−40 dBFS or more), on the frame as the server hears it: decoded and
streamed to 16 kHz.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import dataclasses
import json
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import websockets
from bench_server_client import (
    REPO,
    cpu_seconds,
    our_server,
    percentile,
    playout_late_frames,
    run_clients,
    server_stats,
)
from prometheus_client.parser import text_string_to_metric_families
from speech_helpers import speech_f32

sys.path.insert(0, str(REPO))
import audiocore  # noqa: E402
from audiocore_server.audio.voice import END_OF_SPEECH_S, voiced  # noqa: E402
from audiocore_server.gate.twilio_signature import signature  # noqa: E402

AUTH_TOKEN = "bench-phone-auth-token-0123456789"
RATE = 8000
FRAME_S = 0.020
FRAME_CODES = 160
SILENT_FRAME = b"\xff" * FRAME_CODES
PREBUFFER_S = 0.1  # what a listener holds before playing (Twilio's jitter buffer)
BARGE_IN_AFTER_S = 0.5  # of the first answer played
AFTER_LAST_MEDIA_S = 0.6  # quiet after the last answer's end: the call hangs up
LATE_S = 0.1  # a clear, or a first answer past the model's hangover, later than this is late
CALL_TIMEOUT_S = 40.0


def utterance() -> tuple[list[bytes], list[bool]]:
    """The tests' espeak-ng speech at 8 kHz as 20 ms μ-law frames, and
    which of them are voiced."""
    with tempfile.TemporaryDirectory() as folder:
        speech = speech_f32(Path(folder), RATE)
    codes = audiocore.float32_to_ulaw(speech[: len(speech) // FRAME_CODES * FRAME_CODES])
    frames = [codes[i : i + FRAME_CODES] for i in range(0, len(codes), FRAME_CODES)]
    # As the server hears them: streamed to 16 kHz after silence.
    to_16k = audiocore.Resampler(RATE, 16_000, input="ulaw", output="s16")
    to_16k.process(SILENT_FRAME * 5)
    flags = [voiced(bytes(to_16k.process(frame))) for frame in frames]
    return frames, flags


@dataclasses.dataclass
class CallResult:
    first_audio_s: float = float("nan")  # last voiced frame of the 1st utterance → 1st media
    clear_s: float = float("nan")  # 1st voiced frame of the barge-in → clear received
    late_frames: int = 0  # answers' frames a 100 ms-prebuffer listener got late
    media: int = 0
    send_lag_p99_s: float = 0.0  # the client's own frames behind schedule
    second_answer_s: float = 0.0  # audio of the answer to the barge-in received
    marks_replied: int = 0
    failure: str | None = None


class Call:
    """One call, as Twilio drives it (see the module's docstring)."""

    def __init__(self, ws, index: int, frames: list[bytes], flags: list[bool]) -> None:
        self.ws = ws
        self.sid = f"MZ{index:032x}"
        self.frames, self.flags = frames, flags
        self.sequence = 0
        self.result = CallResult()
        self.answers: list[list[tuple[float, int]]] = [[]]  # (arrival, samples) per answer
        self.clear_at: float | None = None
        self._marks: list[tuple[float, str]] = []  # (plays out at, name)
        self._play_end = 0.0
        self._last_media = 0.0

    def _message(self, event: str, **fields) -> str:
        self.sequence += 1
        return json.dumps(
            {"event": event, "sequenceNumber": str(self.sequence), "streamSid": self.sid, **fields}
        )

    async def run(self) -> CallResult:
        connected = {"event": "connected", "protocol": "Call", "version": "1.0.0"}
        await self.ws.send(json.dumps(connected))
        start = {
            "streamSid": self.sid,
            "accountSid": "AC0001",
            "callSid": "CA" + self.sid[2:],
            "tracks": ["inbound"],
            "customParameters": {},
            "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": RATE, "channels": 1},
        }
        await self.ws.send(self._message("start", start=start))
        reader = asyncio.create_task(self._read())
        try:
            await asyncio.wait_for(self._speak(), CALL_TIMEOUT_S)
            await self.ws.send(self._message("stop", stop={"accountSid": "AC0001"}))
        except TimeoutError:
            self.result.failure = "the call did not reach its end in time"
        except websockets.ConnectionClosed as exc:
            self.result.failure = f"closed by the server: {exc}"
        finally:
            reader.cancel()
        r = self.result
        r.late_frames = sum(playout_late_frames(a, RATE, PREBUFFER_S) for a in self.answers if a)
        r.second_answer_s = sum(n for _, n in self.answers[-1]) / RATE
        if r.failure is None and self.clear_at is None:
            r.failure = "no clear after the barge-in"
        return r

    async def _speak(self) -> None:
        """The caller's side, one frame every 20 ms, in phases."""
        t0 = time.monotonic()
        lags: list[float] = []
        chunk = 0
        voiced_idx = [k for k, v in enumerate(self.flags) if v]
        first_voiced, last_voiced = voiced_idx[0], voiced_idx[-1]

        async def send(frame: bytes) -> float:
            nonlocal chunk
            due = t0 + chunk * FRAME_S
            delay = due - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            await self._reply_due(time.monotonic())
            chunk += 1
            media = {
                "track": "inbound",
                "chunk": str(chunk),
                "timestamp": str(chunk * 20),
                "payload": base64.b64encode(frame).decode(),
            }
            message = self._message("media", media=media)
            sent = time.monotonic()
            lags.append(sent - due)
            await self.ws.send(message)
            return sent

        for _ in range(25):
            await send(SILENT_FRAME)
        end_of_speech = 0.0
        for k, frame in enumerate(self.frames):
            sent = await send(frame)
            if k == last_voiced:
                end_of_speech = sent
        # Silence until half a second of the answer has played.
        while not (self.answers[0] and time.monotonic() >= self._first_play() + BARGE_IN_AFTER_S):
            await send(SILENT_FRAME)
        self.result.first_audio_s = self.answers[0][0][0] - end_of_speech
        barge_in = 0.0
        for k, frame in enumerate(self.frames):
            sent = await send(frame)
            if k == first_voiced:
                barge_in = sent
        # Silence until the second answer has played to its end.
        while not (
            len(self.answers) > 1
            and self.answers[-1]
            and time.monotonic() > self._play_end + AFTER_LAST_MEDIA_S
        ):
            await send(SILENT_FRAME)
        if self.clear_at is not None:
            self.result.clear_s = self.clear_at - barge_in
        self.result.send_lag_p99_s = percentile(lags, 99)

    def _first_play(self) -> float:
        return self.answers[0][0][0] + PREBUFFER_S

    async def _read(self) -> None:
        with contextlib.suppress(websockets.ConnectionClosed):
            async for frame in self.ws:
                now = time.monotonic()
                message = json.loads(frame)
                event = message["event"]
                if event == "media":
                    samples = len(base64.b64decode(message["media"]["payload"]))
                    self.answers[-1].append((now, samples))
                    self.result.media += 1
                    self._play_end = max(self._play_end, now) + samples / RATE
                elif event == "mark":
                    self._marks.append((self._play_end, message["mark"]["name"]))
                elif event == "clear":
                    if self.clear_at is None:
                        self.clear_at = now
                        self.answers.append([])  # what comes next is the next answer
                    self._play_end = now
                    pending, self._marks = self._marks, []
                    for _, name in pending:
                        await self._reply(name)
                await self._reply_due(now)

    async def _reply_due(self, now: float) -> None:
        """Marks whose audio has played by now go back, as Twilio's replies."""
        due = [m for m in self._marks if m[0] <= now]
        if due:
            self._marks = [m for m in self._marks if m[0] > now]
            for _, name in due:
                await self._reply(name)

    async def _reply(self, name: str) -> None:
        self.result.marks_replied += 1
        with contextlib.suppress(websockets.ConnectionClosed):
            await self.ws.send(self._message("mark", mark={"name": name}))


async def _calls(url: str, n: int, stagger_s: float, frames, flags) -> list[CallResult]:
    headers = {"X-Twilio-Signature": signature(AUTH_TOKEN, url, [])}

    async def one(k: int) -> CallResult:
        await asyncio.sleep(stagger_s * k / max(1, n))
        try:
            async with websockets.connect(
                url, additional_headers=headers, max_size=None, compression=None
            ) as ws:
                return await Call(ws, k, frames, flags).run()
        except (OSError, websockets.WebSocketException) as exc:
            return CallResult(failure=f"{type(exc).__name__}: {exc}"[:160])

    return await asyncio.gather(*(one(k) for k in range(n)))


def _server_first_audio_ms(base: str) -> float:
    """The mean of the server's own first-audio histogram (from the model's
    end of speech to the first frame sent), read off ``/metrics``."""
    text = urllib.request.urlopen(f"{base}/metrics", timeout=10).read().decode()
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = sample.labels
            if labels.get("stage") == "client_first_audio" and labels.get("edge") == "model":
                found[sample.name.rsplit("_", 1)[1]] = sample.value
    return 1e3 * found["sum"] / found["count"] if found.get("count") else float("nan")


def run(n: int, stagger_s: float, frames, flags, workers: int = 1, echo: str = "on") -> dict:
    stats_path = Path(tempfile.mkdtemp()) / "stats.json"
    env = {
        "AUDIOCORE_TWILIO_AUTH_TOKEN": AUTH_TOKEN,
        "AUDIOCORE_WORKERS": str(workers),
        "AUDIOCORE_PHONE_ECHO_CANCELLATION": "true" if echo == "on" else "false",
    }
    with our_server(stats_path, **env) as (ws_url, proc):
        base = ws_url.rsplit("/", 1)[0]
        url = base + "/phone/stream"
        cpu0, t0 = cpu_seconds(proc.pid), time.monotonic()
        calls = run_clients(_calls(url, n, stagger_s, frames, flags))
        cpu1, t1 = cpu_seconds(proc.pid), time.monotonic()
        # One worker's histogram (with several, whichever answers).
        first_audio_server = _server_first_audio_ms(base.replace("ws://", "http://"))
    server = server_stats(stats_path)
    ok = [c for c in calls if c.failure is None]
    latency_in = server.get("latency_in", [])
    in_p99 = percentile(latency_in, 99)
    speech_s = len(frames) * FRAME_S
    real_time = [
        c
        for c in ok
        if c.late_frames == 0
        and c.send_lag_p99_s <= FRAME_S
        and c.second_answer_s >= speech_s
        and c.first_audio_s <= END_OF_SPEECH_S + LATE_S
        and c.clear_s <= LATE_S
    ]
    server_ok = in_p99 <= 0.020 and server.get("dropped_input_chunks", 0) == 0
    server_clear = server.get("bargein_latency_s", [])
    # The calls' duration: each call's own, from its start to its stop.
    call_s = (t1 - t0) - stagger_s * (n - 1) / max(1, n)
    return {
        "calls": n,
        "real_time": len(real_time) if server_ok else 0,
        "failed": n - len(ok),
        "failures": sorted({c.failure for c in calls if c.failure})[:3],
        "cpu_per_call_pct": 100 * (cpu1 - cpu0) / n / call_s,
        "server_cpu_pct": 100 * (cpu1 - cpu0) / (t1 - t0),
        "call_s": call_s,
        "first_audio_ms": [1e3 * c.first_audio_s for c in ok],
        "first_audio_server_ms": first_audio_server,
        "clear_client_ms": [1e3 * c.clear_s for c in ok if c.clear_s == c.clear_s],
        "clear_server_ms": [1e3 * v for v in server_clear],
        "in_p99_ms": 1e3 * in_p99,
        "late_frames": sum(c.late_frames for c in calls),
        "media": sum(c.media for c in calls),
        "send_lag_p99_ms": 1e3 * max((c.send_lag_p99_s for c in calls), default=0.0),
        "dropped_input_chunks": server.get("dropped_input_chunks", 0),
        "server_late_frames": server.get("late_frames", 0),
        "concealed_frames": server.get("concealed_frames", 0),
    }


def _p(values: list[float], q: float) -> str:
    return f"{percentile(values, q):.1f}" if values else "—"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", default="1,10,25,50,100", help="comma-separated call counts")
    parser.add_argument(
        "--stagger", type=float, default=4.0, help="spread call starts over this many seconds"
    )
    parser.add_argument(
        "--workers", type=int, default=1, help="start the server with this many worker processes"
    )
    parser.add_argument(
        "--echo-cancellation",
        default="on",
        help="the server's echo canceller on every call: on, off, or both (off,on: each "
        "count without then with it)",
    )
    parser.add_argument("--smoke", action="store_true", help="one call: that it runs")
    args = parser.parse_args()
    echoes = args.echo_cancellation.split(",")
    if not echoes or any(e not in ("on", "off") for e in echoes):
        parser.error(
            f"--echo-cancellation: expected on, off or both, got {args.echo_cancellation!r}"
        )
    counts = [1] if args.smoke else [int(v) for v in args.calls.split(",")]
    frames, flags = utterance()
    print(
        f"utterance: {len(frames) * FRAME_S:.2f} s ({sum(flags)} of {len(frames)} frames "
        f"voiced); starts spread over {args.stagger:g} s; offline model, "
        f"{args.workers} worker(s)"
    )
    print(
        "| calls | canceller | real time | failed | server CPU % | CPU per call (% of a core) "
        "| first audio p50/p99 ms | server's part, mean ms | clear, client p50/p99/max ms "
        "| clear, server p50/p99/max ms | input p99 ms | late / media | dropped in "
        "| concealed | client lag p99 ms |"
    )
    print("|---:|---|---:|---:|---:|---:|---|---:|---|---|---:|---|---:|---:|---:|")
    for n, echo in [(n, e) for n in counts for e in echoes]:
        r = run(n, args.stagger, frames, flags, args.workers, echo)
        fa, cc, cs = r["first_audio_ms"], r["clear_client_ms"], r["clear_server_ms"]
        print(
            f"| {n} | {echo} | {r['real_time']} | {r['failed']} | {r['server_cpu_pct']:.1f} "
            f"| {r['cpu_per_call_pct']:.2f} | {_p(fa, 50)} / {_p(fa, 99)} "
            f"| {r['first_audio_server_ms']:.1f} "
            f"| {_p(cc, 50)} / {_p(cc, 99)} / {_p(cc, 100)} "
            f"| {_p(cs, 50)} / {_p(cs, 99)} / {_p(cs, 100)} "
            f"| {r['in_p99_ms']:.2f} | {r['late_frames']} / {r['media']} "
            f"| {r['dropped_input_chunks']} | {r['concealed_frames']} "
            f"| {r['send_lag_p99_ms']:.1f} |",
            flush=True,
        )
        for why in r["failures"]:
            print(f"    failed calls: {why}")
        if args.smoke:
            assert r["failed"] == 0 and cc, "the call did not run to its end"


if __name__ == "__main__":
    main()
