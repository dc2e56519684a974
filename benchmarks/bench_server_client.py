"""Shared pieces of the server benchmarks: speech input, server processes,
and a real-time client that measures what a listener would experience.

Not a benchmark itself; imported by bench_server.py and bench_server_adk.py.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import uvloop

REPO = Path(__file__).resolve().parent.parent
# The speech the server tests use, from their helper (as pytest imports it).
sys.path.insert(0, str(REPO / "tests" / "server"))
from speech_helpers import speech_f32  # noqa: E402

FRAME_S = 0.020
IN_RATE = 48_000
OUT_RATE = 24_000
# The `start` of a benchmark session: 48 kHz float32 up, binary 24 kHz
# PCM16 down, push-to-talk (the turns are the activity brackets).
PUSH_TO_TALK_START = json.dumps(
    {
        "type": "start",
        "input": {"sampleRate": IN_RATE, "format": "f32", "channels": 1},
        "output": {"sampleRate": OUT_RATE, "binary": True},
        "turnDetection": "manual",
    }
)
OUT_FRAME = OUT_RATE * 40 // 1000  # the server's default output frame


def push_to_talk_start(echo_cancellation: str = "client") -> str:
    """``PUSH_TO_TALK_START``, with the server's echo canceller on the
    microphone when ``echo_cancellation`` is "server"."""
    start = json.loads(PUSH_TO_TALK_START)
    if echo_cancellation != "client":
        start["echoCancellation"] = echo_cancellation
    return json.dumps(start)


def speech_48k() -> np.ndarray:
    """The tests' speech (espeak-ng) as 48 kHz float32, trimmed to a
    multiple of 6 samples (whole frames at 48 and 16 kHz)."""
    with tempfile.TemporaryDirectory() as folder:
        x = speech_f32(Path(folder), IN_RATE)
    return x[: len(x) // 6 * 6]


WATERMARK_LEVEL = 0.01  # -40 dBFS of uniform noise: far below the speech, far above one LSB


def watermarked(speech: np.ndarray, *key: int) -> np.ndarray:
    """``speech`` plus low-level noise drawn from ``key`` (session, turn):
    every few samples of the echo then name one place in it, and no other
    turn's audio matches (see ``account_samples``)."""
    noise = np.random.default_rng(key).uniform(-WATERMARK_LEVEL, WATERMARK_LEVEL, len(speech))
    return (speech + noise).astype(np.float32)


def exact_echo(speech: np.ndarray) -> bytes:
    """What the offline model answers to one push-to-talk turn of 48 kHz
    float32 ``speech``, as 24 kHz PCM16: the server's 48 → 16 kHz PCM16
    (streamed, reset at each turn edge, so equal to one call), then the
    model's 16 → 24 kHz of the whole utterance."""
    import audiocore

    speech16 = audiocore.resample(speech, IN_RATE, 16_000, input="f32", output="s16")
    return bytes(audiocore.resample(speech16, 16_000, OUT_RATE, input="s16", output="s16"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and its live children (server
    workers), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    own = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return own + sum(cpu_seconds(int(child)) for child in children)


@dataclasses.dataclass(frozen=True)
class LocalGemini:
    """The local Gemini Live endpoint (tests/gemini_live) in its own process."""

    url: str
    ca_file: str
    api_key: str
    proc: subprocess.Popen

    def server_env(self, model: str = "gemini-3.8-live") -> dict[str, str]:
        """What makes ``python -m server`` run the production model path against it."""
        return {
            "AUDIOCORE_MODEL": model,
            "AUDIOCORE_GEMINI_BASE_URL": self.url,
            "AUDIOCORE_GEMINI_CA_FILE": self.ca_file,
            "GOOGLE_API_KEY": self.api_key,
            "NO_PROXY": "127.0.0.1,localhost",
        }


@contextlib.contextmanager
def endpoint_process(module: str, *args: str) -> Iterator[tuple[dict[str, str], subprocess.Popen]]:
    """``python -m <module>`` (a local provider endpoint, extra command-line
    ``args``) until the block ends; yields the JSON line it prints once it
    listens, and the process."""
    proc = subprocess.Popen(
        [sys.executable, "-m", module, *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # one JSON line once it listens
        if not line:
            raise RuntimeError(f"{module} did not start")
        yield json.loads(line), proc
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)


@contextlib.contextmanager
def local_gemini(*args: str) -> Iterator[LocalGemini]:
    """``python -m tests.gemini_live`` (extra command-line ``args``), until the block ends."""
    with endpoint_process("tests.gemini_live", *args) as (info, proc):
        yield LocalGemini(info["url"], info["caFile"], info["apiKey"], proc)


@dataclasses.dataclass(frozen=True)
class LocalOpenAI:
    """The local OpenAI Realtime endpoint (tests/openai_realtime) in its own process."""

    base_url: str
    ca_file: str
    api_key: str
    proc: subprocess.Popen

    def server_env(self, model: str = "gpt-realtime-2") -> dict[str, str]:
        """What makes ``python -m server`` run the OpenAI path against it."""
        return {
            "AUDIOCORE_MODEL": f"openai:{model}",
            "AUDIOCORE_OPENAI_BASE_URL": self.base_url,
            "AUDIOCORE_OPENAI_CA_FILE": self.ca_file,
            "OPENAI_API_KEY": self.api_key,
            "NO_PROXY": "127.0.0.1,localhost",
        }


@contextlib.contextmanager
def local_openai(*args: str) -> Iterator[LocalOpenAI]:
    """``python -m tests.openai_realtime`` (extra command-line ``args``), until the block ends."""
    with endpoint_process("tests.openai_realtime", *args) as (info, proc):
        yield LocalOpenAI(info["baseUrl"], info["caFile"], info["apiKey"], proc)


@contextlib.contextmanager
def py_spy(pid: int, output: Path | None) -> Iterator[None]:
    """Sample the server with py-spy (``pip install py-spy``) into ``output``
    (collapsed stacks, idle excluded) while the block runs; nothing if None."""
    if output is None:
        yield
        return
    output.parent.mkdir(parents=True, exist_ok=True)
    spy = subprocess.Popen(
        ["py-spy", "record", "--pid", str(pid), "--format", "raw", "--rate", "250",
         "--nonblocking", "--output", str(output)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        yield
    finally:
        spy.send_signal(signal.SIGINT)
        spy.wait(30)


@contextlib.contextmanager
def our_server(
    stats_path: Path, tree: Path = REPO, **env: str
) -> Iterator[tuple[str, subprocess.Popen]]:
    """``python -m server`` of the checkout ``tree`` (another one: a
    before/after comparison with the same clients), on a free port."""
    port = free_port()
    data = tempfile.mkdtemp()
    environ = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "GEMINI_"))},
        "AUDIOCORE_COLLECT_TIMINGS": "1",
        "AUDIOCORE_STATS_PATH": str(stats_path),
        "AUDIOCORE_DATA_DIR": data,
        "AUDIOCORE_MODEL": "offline",
        # Every benchmark session comes from 127.0.0.1: the per-address limit
        # (50) would refuse the 51st.
        "AUDIOCORE_MAX_CONNECTIONS_PER_CLIENT": "1000",
        **env,
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "server", "--port", str(port), "--log-level", "warning"],
        cwd=tree,
        env=environ,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz")
        yield f"ws://127.0.0.1:{port}/ws", proc
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
        shutil.rmtree(data, ignore_errors=True)


def server_stats(stats_path: Path) -> dict:
    """The server's totals; with several workers, each wrote its own file."""
    files = [stats_path] if stats_path.exists() else sorted(stats_path.parent.glob("stats.json.*"))
    merged: dict = {}
    for part in (json.loads(f.read_text()) for f in files):
        for key, value in part.items():
            merged[key] = merged.get(key, type(value)()) + value
    return merged


@dataclasses.dataclass
class TurnResult:
    first_audio_s: float  # end of speech (activity_end sent) → first audio frame received
    samples: int  # echo samples received in the turn
    expected: int
    late_frames: int  # frames that arrived after the listener's playback ran dry
    frames: int
    # Per audio chunk received, in order: how long after its ideal play time it
    # arrived (chunk_lateness); negative when it came ahead of it.
    lateness_s: list[float] = dataclasses.field(default_factory=list)
    audio: bytes = b""  # the turn's echo, when the client kept it


@dataclasses.dataclass(frozen=True)
class EchoCheck:
    complete: bool  # every frame of the echo arrived, in order
    exact: int  # frames identical to the echo's
    altered: int  # echo frames that arrived changed (faded in after a concealment)
    concealed: int  # frames that are not the echo's: made up during a stall


def check_echo(audio: bytes, echo: bytes, frame: int = OUT_FRAME) -> EchoCheck:
    """Walk the received PCM16 in ``frame``-sample frames against the exact
    echo (the tail padded with silence). A frame equal to the echo's next
    frame is exact; one close to it (residual energy under a quarter of the
    frame's) is the echo's, altered; any other was inserted, and the echo's
    next frame is still expected after it."""
    step = 2 * frame
    ref = np.frombuffer(echo + bytes(-len(echo) % step), "<i2").astype(np.float64)
    got = np.frombuffer(audio[: len(audio) // 2 * 2], "<i2").astype(np.float64)
    pos = exact = altered = concealed = 0
    for start in range(0, len(got), frame):
        f = got[start : start + frame]
        r = ref[pos : pos + len(f)]
        if len(r) == len(f) and np.array_equal(f, r):
            exact += 1
            pos += frame
        elif len(r) == len(f) and np.sum((f - r) ** 2) < 0.25 * max(np.sum(r**2), 1.0):
            altered += 1
            pos += frame
        else:
            concealed += 1
    return EchoCheck(pos >= len(ref), exact, altered, concealed)


@dataclasses.dataclass(frozen=True)
class SampleAccount:
    expected: int  # samples of the exact echo
    received: int
    lost: int  # echo samples that never arrived
    duplicated: int  # arrivals of an echo sample beyond its first
    foreign: int  # received samples that are no sample of this echo

    @property
    def exact(self) -> bool:
        return not (self.lost or self.duplicated or self.foreign)


def account_samples(received: bytes, expected: bytes, key: int = 8) -> SampleAccount:
    """Trace every received PCM16 sample to a sample of the exact echo.

    The echo must carry a watermark (low-level noise keyed to the turn) so
    that ``key`` consecutive samples name one place in it. Received samples
    are matched in runs: a run goes on while the samples equal the echo's
    next ones; where it breaks, the next ``key`` received samples are looked
    up among the echo's windows that occur once, and a run starts there. A
    sample found nowhere is foreign (made up, or another turn's); an echo
    sample matched twice is duplicated; never matched, lost."""
    got = np.frombuffer(received[: len(received) // 2 * 2], "<i2")
    ref = np.frombuffer(expected[: len(expected) // 2 * 2], "<i2")
    if np.array_equal(got, ref):  # the usual case, without the index
        return SampleAccount(len(ref), len(got), 0, 0, 0)
    windows = np.lib.stride_tricks.sliding_window_view(ref, key) if len(ref) >= key else ()
    index: dict[bytes, int] = {}
    for position, window in enumerate(windows):
        index[window.tobytes()] = -1 if window.tobytes() in index else position
    # Silence (the padding of the last frame) names no place: a stall's
    # made-up silence must not pass for it.
    index.pop(bytes(2 * key), None)
    uses = np.zeros(len(ref), np.int64)
    foreign = i = pos = 0
    while i < len(got):
        n = min(len(got) - i, len(ref) - pos)
        same = got[i : i + n] == ref[pos : pos + n]
        run = n if same.all() else int(np.argmin(same))
        if run:
            uses[pos : pos + run] += 1
            i, pos = i + run, pos + run
            continue
        found = index.get(got[i : i + key].tobytes(), -1)
        if found < 0:
            foreign += 1
            i += 1
        else:
            pos = found
    lost = int(np.count_nonzero(uses == 0))
    duplicated = int(np.sum(uses[uses > 1] - 1))
    return SampleAccount(len(ref), len(got), lost, duplicated, foreign)


def chunk_lateness(arrivals: list[tuple[float, int]], ended: float, rate: int) -> list[float]:
    """Per-chunk latency of an echo: chunk k, whose first sample is at offset
    o_k (s) into the echo, arrives at a_k; its latency is a_k - (ended + o_k),
    where ``ended`` is when the client sent the end of the utterance. That is
    the time from the earliest moment the model could have the utterance to
    the chunk arriving, minus the time playing the echo before it would take
    in real time: the delay a listener who starts playing the echo at
    ``ended`` would see on that chunk. Chunk 0's is the first-audio latency; a
    server that sends faster than real time gets negative values (early)."""
    out, offset = [], 0
    for arrival, samples in arrivals:
        out.append(arrival - (ended + offset / rate))
        offset += samples
    return out


def playout_late_frames(arrivals: list[tuple[float, int]], rate: int, prebuffer_s: float) -> int:
    """Frames a listener would get late: playback starts ``prebuffer_s`` after
    the first frame and runs continuously; a frame is late if it arrives after
    its play time."""
    if not arrivals:
        return 0
    play_at = arrivals[0][0] + prebuffer_s
    late = 0
    for arrival, samples in arrivals:
        if arrival > play_at:
            late += 1
            play_at = arrival  # playback stalls, then resumes
        play_at += samples / rate
    return late


async def paced_frames(frames: list[bytes], send) -> float:
    """Send frames at real-time pace; returns the time the last one went out."""
    t0 = time.monotonic()
    for k, frame in enumerate(frames):
        delay = t0 + k * FRAME_S - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        await send(frame)
    return time.monotonic()


def run_clients(main):
    """Run the load clients' coroutine on uvloop: they share this machine's
    two cores with the server, and uvloop's loop costs them less CPU."""
    return uvloop.run(main)


def split(x: np.ndarray, rate: int) -> list[np.ndarray]:
    step = int(rate * FRAME_S)
    return [x[i : i + step] for i in range(0, len(x), step)]


async def our_session(
    url: str,
    speech: np.ndarray,
    turns: int,
    prebuffer_s: float = 0.1,
    counter: dict | None = None,
    start: str = PUSH_TO_TALK_START,
):
    """Push-to-talk turns of 48 kHz f32 speech in binary frames, echo back as
    binary 24 kHz PCM16; silence keeps streaming while the echo plays."""
    import websockets

    frames = [c.tobytes() for c in split(speech, IN_RATE)]
    quiet = np.zeros(int(IN_RATE * FRAME_S), np.float32).tobytes()
    gap = int((len(speech) / IN_RATE + 0.6) / FRAME_S)
    async with websockets.connect(url, max_size=None, compression=None) as ws:
        await ws.send(start)
        arrivals: list[tuple[float, int]] = []
        received: list[bytes] = []
        finished = asyncio.Queue()
        errors: list[str] = []

        counter = {"up": 0, "down": 0} if counter is None else counter

        async def send(frame: bytes | str) -> None:
            counter["up"] += len(frame)
            await ws.send(frame)

        async def receive() -> None:
            async for message in ws:
                counter["down"] += len(message)
                if isinstance(message, bytes):
                    arrivals.append((time.monotonic(), len(message) // 2))
                    received.append(message)
                elif '"finish"' in message:
                    finished.put_nowait(time.monotonic())
                elif '"type":"data-interrupted"' in message:
                    counter["interrupted"] = counter.get("interrupted", 0) + 1
                elif '"type":"error"' in message:
                    errors.append(json.loads(message)["errorText"])

        reader = asyncio.create_task(receive())
        try:
            results = await push_to_talk_turns(
                send,
                arrivals,
                finished,
                turns=turns,
                frames=frames,
                quiet=quiet,
                gap=gap,
                edges=('{"type":"activity_start"}', '{"type":"activity_end"}'),
                # The exact echo, padded with silence to whole 40 ms frames.
                expected=-(-(len(speech) // 2) // OUT_FRAME) * OUT_FRAME,
                prebuffer_s=prebuffer_s,
                received=received,
            )
        except TimeoutError:
            raise RuntimeError(
                f"a turn did not finish within 30 s; server errors: {errors}"
            ) from None
        finally:
            reader.cancel()
    return results


async def push_to_talk_turns(
    send,
    arrivals,
    finished,
    *,
    turns,
    frames,
    quiet,
    gap,
    edges,
    expected,
    prebuffer_s,
    received: list[bytes] | None = None,
) -> list[TurnResult]:
    """The turns of one session, whatever its wire format: the activity
    edges around paced speech frames, then silence while the echo plays.
    `receive` (the caller's reader task) fills `arrivals` with (time,
    samples), and `received` (if given) with the audio, and puts the time of
    each turn's end in `finished`."""
    results = []
    for _ in range(turns):
        arrivals.clear()
        if received is not None:
            received.clear()
        await send(edges[0])
        await paced_frames(frames, send)
        await send(edges[1])
        ended = time.monotonic()
        quiet_task = asyncio.create_task(paced_frames([quiet] * gap, send))
        await asyncio.wait_for(finished.get(), 30)
        await quiet_task
        turn = list(arrivals)
        if turn:
            # The user speaks again once the answer has been heard, not merely
            # received: a server that sends ahead of real time (or a loaded
            # machine that delays the answer past the gap) must not turn the
            # next turn into a barge-in. The microphone keeps streaming.
            heard = turn[0][0] + prebuffer_s + sum(n for _, n in turn) / OUT_RATE
            more = math.ceil((heard - time.monotonic()) / FRAME_S)
            if more > 0:
                await paced_frames([quiet] * more, send)
        results.append(
            TurnResult(
                first_audio_s=(turn[0][0] - ended) if turn else float("nan"),
                samples=sum(n for _, n in turn),
                expected=expected,
                late_frames=playout_late_frames(turn, OUT_RATE, prebuffer_s),
                frames=len(turn),
                lateness_s=chunk_lateness(turn, ended, OUT_RATE),
                audio=b"".join(received) if received is not None else b"",
            )
        )
    return results


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
