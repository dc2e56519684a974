"""The answer's replay (web/replay.js): the WAV framing against audiocore's,
and in Chromium the "Recorded Audio" shown after an answer, holding exactly
the audio the page played and the server reported in ``messageMetadata.audio``."""

from __future__ import annotations

import base64
import json
import pathlib
import shutil
import subprocess

import numpy as np
import pytest
from web_helpers import ROOT, check_no_page_errors, connect, demo, entries, missing, wait_for

import audiocore

# node prints each case's WAV, base64, one a line.
WAV_OF = """
import { wavFile } from "./web/replay.js";
for (const [rate, b64] of JSON.parse(process.argv[1])) {
  const pcm = Uint8Array.from(Buffer.from(b64, "base64"));
  console.log(Buffer.from(wavFile(pcm, rate)).toString("base64"));
}
"""


def test_wav_file_is_audiocores_wav() -> None:
    node = shutil.which("node")
    if node is None:
        missing("node is not installed (Debian package nodejs)")
    seed = 21
    rng = np.random.default_rng(seed)
    cases = [
        (rate, rng.integers(-32768, 32768, n, dtype=np.int16).astype("<i2").tobytes())
        for rate, n in ((8_000, 0), (16_000, 1), (24_000, 961), (44_100, 7), (48_000, 4_800))
    ]
    argv = json.dumps([[rate, base64.b64encode(pcm).decode()] for rate, pcm in cases])
    result = subprocess.run(
        [node, "--input-type=module", "-e", WAV_OF, argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    made = [base64.b64decode(line) for line in result.stdout.split()]
    for (rate, pcm), wav in zip(cases, made, strict=True):
        assert wav == audiocore.to_wav(pcm, rate), (rate, len(pcm), f"seed {seed}")


READ_REPLAY = """() => {
  const figure = document.querySelector("#log figure.replay");
  const audio = figure.querySelector("audio");
  return {
    reported: Number(figure.dataset.reportedBytes),
    caption: figure.querySelector("figcaption").textContent,
    linked: figure.querySelector("a").href === audio.src,
    duration: audio.duration,
    afterAnswer: figure.previousElementSibling.classList.contains("agent"),
  };
}"""


@pytest.mark.parametrize("binary", ["1", "0"], ids=["binary-frames", "base64-data-pcm"])
def test_an_answer_is_followed_by_its_recorded_audio(open_page, binary: str) -> None:
    page = open_page(f"?mode=push-to-talk&binary={binary}")  # no mic audio is sent
    connect(page)
    page.fill("#text", "hello there")
    page.click("#send")
    wait_for(page, "__demo.received.chunks.finish >= 1")
    assert any("You said: hello there" in text for text in entries(page, "agent"))
    # The browser has read the WAV's header: it is a file it can play.
    wait_for(page, "document.querySelector('#log figure.replay audio')?.readyState >= 1")
    replay = page.evaluate(READ_REPLAY)
    with page.expect_download() as saved:
        page.click("#log figure.replay a")
    download = saved.value
    wav = audiocore.read_wav(pathlib.Path(download.path()).read_bytes())
    rate = demo(page, "__demo.sampleRate")
    assert (wav.sample_rate, wav.channels, wav.format) == (rate, 1, "s16")
    # Every sample the page received and played, as many as the server says it sent.
    samples = demo(page, "__demo.received.samples")
    assert wav.frames == samples and len(wav.data) == 2 * samples == replay["reported"]
    assert abs(replay["duration"] - samples / rate) < 1e-3
    # The offline model's 150 ms cue (a quarter of full scale) is in it.
    peak = np.abs(np.frombuffer(wav.data, "<i2")).max()
    assert 0.2 * 32767 < peak < 0.3 * 32767
    assert replay["caption"] == f"Recorded Audio · {samples / rate:.2f} s"
    assert replay["linked"] and download.suggested_filename == "answer-1.wav"
    assert replay["afterAnswer"]
    check_no_page_errors(page)
