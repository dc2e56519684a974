"""Helpers shared by the web suite's fixtures, tests and benchmarks/bench_web.py."""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from typing import NoReturn

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("AUDIOCORE_CHROMIUM", "/usr/bin/chromium")
SPEECH_TEXT = "Hello, this is a test of the audio bridge."
# The fake mic loops the file: lead-in, speech (~2.5 s), then enough silence
# for the offline model's 600 ms hangover and the whole echo to play.
LEAD_IN_S = 0.3
INSECURE_HOST = "demo.invalid"
TAIL_S = 5.0


def missing(reason: str) -> NoReturn:
    """Skip for want of a tool; fail instead where the environment promises
    every tool (CI sets AUDIOCORE_REQUIRE_BROWSER=1), so a broken install
    cannot pass as skipped tests."""
    if os.environ.get("AUDIOCORE_REQUIRE_BROWSER") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


def _need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        missing(f"{tool} is not installed")
    return path


def make_speech(folder: pathlib.Path, *, lead_in: float, tail: float, name: str) -> pathlib.Path:
    """espeak-ng speech as 48 kHz mono s16 WAV, padded with silence."""
    _need("espeak-ng")
    _need("sox")
    raw, out = folder / f"{name}-raw.wav", folder / f"{name}.wav"
    subprocess.run(["espeak-ng", "-w", str(raw), SPEECH_TEXT], check=True)
    subprocess.run(
        ["sox", str(raw), "-r", "48000", "-c", "1", "-b", "16", str(out)]
        + ["pad", str(lead_in), str(tail), "norm", "-3"],
        check=True,
    )
    return out


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def chromium_args(fake_audio: pathlib.Path) -> list[str]:
    return [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--use-fake-ui-for-media-stream",
        "--use-fake-device-for-media-stream",
        f"--use-file-for-fake-audio-capture={fake_audio}",
        # A name that is not localhost, for the insecure-page test.
        f"--host-resolver-rules=MAP {INSECURE_HOST} 127.0.0.1",
    ]


def launch(pw: object, fake_audio: pathlib.Path) -> object:
    return pw.chromium.launch(  # type: ignore[attr-defined]
        executable_path=CHROMIUM, headless=True, args=chromium_args(fake_audio)
    )


class ServerFailed(RuntimeError):
    pass


@contextlib.contextmanager
def run_server(
    data_dir: pathlib.Path,
    *,
    timeout_s: float = 30,
    port: int | None = None,
    extra_args: Sequence[str] = (),
) -> Iterator[str]:
    """``python -m server`` (offline model) on 127.0.0.1 and ``port`` (a free
    one by default; a fixed one to start a server again where a page had it),
    with ``extra_args`` after the usual options.

    Yields the page's URL (http://127.0.0.1:PORT/) once /healthz answers.
    Google credentials are removed from its environment, so the offline model
    runs whatever the shell has set.
    """
    port = port or free_port()
    log_path = data_dir / "audiocore_server.log"
    env = {k: v for k, v in os.environ.items() if k not in ("GOOGLE_API_KEY", "GEMINI_API_KEY")}
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "server", "--host", "127.0.0.1", "--port", str(port)]
            + ["--data-dir", str(data_dir), "--model", "offline", "--log-level", "warning"]
            # The insecure-page test reaches the server under another name.
            + ["--allowed-hosts", INSECURE_HOST]
            + list(extra_args),
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise ServerFailed(
                    f"the server exited ({proc.returncode}):\n{log_path.read_text()}"
                )
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(url + "healthz", timeout=1) as response,
            ):
                if response.status == 200:
                    break
            if time.monotonic() > deadline:
                raise ServerFailed(f"the server did not answer /healthz:\n{log_path.read_text()}")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ---------------------------------------------------------------- the page


def demo(page, expr: str):
    """Evaluate ``expr`` in the page (``__demo`` is its read-only test hook)."""
    return page.evaluate(f"() => {expr}")


def wait_for(page, condition: str, timeout_s: float = 15) -> None:
    """Until ``condition`` holds in the page; the timeout is a guard against a
    hang, not a speed requirement."""
    page.wait_for_function(f"() => {condition}", timeout=timeout_s * 1000)


def connect(page) -> dict:
    page.click("#connect")
    wait_for(page, "__demo.state === 'connected'", 10)
    return demo(page, "__demo.session")


def check_no_page_errors(page) -> None:
    assert page.page_errors == [], page.page_errors


def entries(page, role: str) -> list[str]:
    return page.locator(f"#log .entry.{role}").all_inner_texts()
