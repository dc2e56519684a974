"""The demo page (web/) in real Chromium against the real server (offline model).

The fake microphone plays espeak-ng speech then silence, in a loop; the
offline model echoes each utterance back, so every number here comes from
real audio through the page's worklets, the socket, audiocore and ADK.
Measurements come from the page's test hook, ``window.__demo``.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess

import pytest
from web_helpers import (
    INSECURE_HOST,
    ROOT,
    check_no_page_errors,
    connect,
    demo,
    entries,
    launch,
    make_speech,
    missing,
    wait_for,
)

from audiocore_server.settings import Settings

ARTIFACTS = ROOT / "artifacts"
# Timings are measured by benchmarks/bench_web.py, never asserted here: a
# loaded machine makes anything slower. What the tests check about time is
# causal: an answer cannot come before its cause.
#
# The offline model ends a hands-free turn after 600 ms without speech (its
# hangover), so no reply starts sooner after the last voiced frame; 50 ms
# for the 20 ms frames and the level detector's edges.
HANGOVER_MS = 600 - 50
FRAME_16K = 320  # one 20 ms capture frame as the model hears it (16 kHz)


# ------------------------------------------------------------------ session


def test_connects_at_the_native_rate_both_ways(open_page):
    page = open_page()
    info = connect(page)
    rate = demo(page, "__demo.sampleRate")
    assert rate in (8000, 11025, 16000, 22050, 24000, 32000, 44100, 48000)
    assert info["input"] == {"sampleRate": rate, "format": "f32", "channels": 1}
    assert info["output"]["sampleRate"] == rate
    assert info["output"]["binary"] is True
    assert info["model"] == "offline"
    status = page.inner_text("#status")
    assert f"in {rate} Hz f32" in status and f"out {rate} Hz s16 binary" in status
    # The microphone is open with the processing the issue asks for.
    settings = demo(page, "__demo.micSettings()")
    assert settings["echoCancellation"] and settings["noiseSuppression"]
    assert settings["autoGainControl"]
    assert info["echoCancellation"] == "client"  # the browser's own, the default
    check_no_page_errors(page)


def test_echo_cancellation_in_the_server_turns_the_browsers_off(open_page):
    """The setting for a loudspeaker the browser's canceller does not
    handle: the microphone raw (no echo cancellation, no gain control), and
    the server asked to cancel (docs/audio.md, "In the server")."""
    page = open_page()
    page.click("footer details summary")  # the settings, folded
    page.check("#server-aec")
    info = connect(page)
    assert info["echoCancellation"] == "server"
    settings = demo(page, "__demo.micSettings()")
    assert settings["echoCancellation"] is False
    assert settings["autoGainControl"] is False
    assert settings["noiseSuppression"]
    check_no_page_errors(page)


def test_speech_round_trip_plays_the_echo_without_underruns(open_page):
    """Fake-mic speech -> transcript and agent words -> echo played in full."""
    page = open_page()
    connect(page)
    wait_for(page, "__demo.events.ended >= 1", 20)  # the first echo played to its end
    captured = demo(page, "__demo.capture")
    assert captured["sent"] > 50 and captured["voiced"] > 20
    user = entries(page, "user")
    agent = entries(page, "agent")
    assert user and "s of audio" in user[0], user
    assert agent and "I heard" in agent[0], agent
    # The utterance's exact length, from the model's description of it.
    utterance = int(re.search(r"\((\d+) samples at 16000 Hz\)", user[0]).group(1)) / 16000
    rate = demo(page, "__demo.sampleRate")
    played = demo(page, "__demo.playback")
    # Every sample the server sent was played: the echo's length at our rate
    # (within the resamplers' few samples of delay), its last frame padded to
    # a whole 40 ms output frame.
    extra = played["samplesPlayed"] - utterance * rate
    assert -0.002 * rate < extra < (0.040 + 0.002) * rate, (played, utterance)
    assert played["samplesPlayed"] == demo(page, "__demo.received.samples")
    assert played["underruns"] == 0
    latency = demo(page, "__demo.latencies")[0]
    assert latency >= HANGOVER_MS, latency  # the model waited for the end of the speech
    assert "reply latency" in page.inner_text("#status")
    check_no_page_errors(page)


def test_typed_turn_and_screenshot(open_page):
    """A typed turn mid-conversation; the page is saved for the README."""
    page = open_page()
    connect(page)
    wait_for(page, "__demo.events.ended >= 1", 20)
    page.fill("#text", "Hello from the keyboard")
    page.press("#text", "Enter")
    wait_for(page, "__demo.received.chunks.finish >= 2")
    assert "Hello from the keyboard" in entries(page, "user")
    assert any("You said: Hello from the keyboard" in text for text in entries(page, "agent"))
    wait_for(page, "__demo.events.ended >= 2")  # its audio cue played too
    assert page.input_value("#text") == ""
    ARTIFACTS.mkdir(exist_ok=True)
    # Mid-conversation: the next utterance's echo is playing.
    wait_for(page, "__demo.playback.state === 'playing'", 15)
    page.wait_for_timeout(400)
    page.screenshot(path=str(ARTIFACTS / "demo.png"))
    page.set_viewport_size({"width": 390, "height": 844})
    page.screenshot(path=str(ARTIFACTS / "demo-phone.png"))
    width = demo(page, "document.documentElement.scrollWidth")
    assert width <= 390, f"the page scrolls sideways on a phone ({width}px)"
    check_no_page_errors(page)


@pytest.mark.parametrize("binary", ["1", "0"], ids=["binary-frames", "base64-data-pcm"])
def test_typed_turn_audio_both_transports(open_page, binary):
    page = open_page(f"?mode=push-to-talk&binary={binary}")  # no mic audio is sent
    info = connect(page)
    assert info["output"]["binary"] is (binary == "1")
    page.fill("#text", "what time is it")
    page.click("#send")
    wait_for(page, "__demo.events.ended >= 1")
    tools = entries(page, "tool")
    assert tools and tools[0].startswith("get_current_time") and '"time"' in tools[0], tools
    assert any(text.startswith("It is ") for text in entries(page, "agent"))
    played = demo(page, "__demo.playback")
    rate = demo(page, "__demo.sampleRate")
    # The 150 ms cue, which the server's pacer completes with silence to a
    # whole output frame (the page may resample it by a sample or two).
    frame_s = Settings.output_frame_ms / 1000
    padded_s = math.ceil(0.15 / frame_s) * frame_s
    assert 0.15 * rate - 2 <= played["samplesPlayed"] <= padded_s * rate + 2, played
    assert played["underruns"] == 0
    chunks = demo(page, "__demo.received.chunks")
    assert ("data-pcm" in chunks) is False  # data-pcm is decoded, never reaches chunks
    check_no_page_errors(page)


# ------------------------------------------------------------------ barge-in


def test_interrupt_silences_playback_within_bound(open_page):
    page = open_page()
    connect(page)
    wait_for(page, "__demo.playback.state === 'playing' && __demo.playback.samplesPlayed > 20000")
    page.click("#interrupt")
    wait_for(page, "__demo.flushes.length >= 1", 5)
    flush = demo(page, "__demo.flushes[0]")
    assert flush["reason"] == "button"
    # Silence follows the request, after a fade of at most the worklet's 5 ms
    # (a configuration, not a speed); how soon is bench_web.py's to measure.
    assert flush["contextMs"] >= 0 and flush["roundTripMs"] >= 0, flush
    assert flush["fadeMs"] <= 6, flush
    played = demo(page, "__demo.playback.samplesPlayed")
    wait_for(page, "(__demo.received.chunks['data-interrupted'] ?? 0) >= 1", 5)
    page.wait_for_timeout(500)
    # Nothing of the interrupted turn plays after the flush.
    after = demo(page, "__demo.playback")
    assert after["samplesPlayed"] == played and after["state"] == "idle", after
    assert after["bufferedSamples"] == 0
    assert page.locator("#log .entry.agent[data-interrupted=true]").count() == 1
    # The conversation goes on: the next utterance is answered and played.
    wait_for(page, "__demo.events.started >= 2", 15)
    check_no_page_errors(page)


def test_server_barge_in_flushes_playback(playwright_instance, server_url, tmp_path):
    """Speech over the agent's echo: the model interrupts, the page flushes."""
    # Short silence: the next loop's speech starts while the echo plays.
    wav = make_speech(tmp_path, lead_in=0.3, tail=1.2, name="overlap")
    browser = launch(playwright_instance, wav)
    try:
        page = browser.new_page()
        page.goto(server_url)
        connect(page)
        wait_for(page, "__demo.flushes.length >= 1", 20)
        flush = demo(page, "__demo.flushes[0]")
        assert flush["reason"] == "server:model", flush
        assert flush["contextMs"] >= 0, flush
        assert demo(page, "__demo.received.chunks['data-interrupted']") >= 1
    finally:
        browser.close()


# ------------------------------------------------------------------ push-to-talk


def test_push_to_talk_with_the_space_bar(open_page):
    """Space held ~1.5 s: exactly that audio is the turn. (Also the s16 input path.)"""
    page = open_page("?mode=push-to-talk&input=s16")
    info = connect(page)
    assert info["input"]["format"] == "s16"
    assert info["turnDetection"] == "manual"
    assert page.is_visible("#ptt")
    wait_for(page, "__demo.capture.frames >= 50")  # the microphone runs...
    assert demo(page, "__demo.capture.sent") == 0  # ...and nothing is sent until we hold
    page.keyboard.down("Space")
    assert page.get_attribute("#ptt", "aria-pressed") == "true"
    wait_for(page, "__demo.capture.sent >= 75")  # ~1.5 s of 20 ms frames
    page.keyboard.up("Space")
    assert page.get_attribute("#ptt", "aria-pressed") == "false"
    sent = demo(page, "__demo.capture.sent")
    wait_for(page, "__demo.events.ended >= 1", 15)
    user = entries(page, "user")
    assert user and "s of audio" in user[0]
    # The turn is exactly the audio sent while the key was down: it ended at
    # the release (no voice detection, no hangover appended), within the
    # resampler's few samples.
    samples = int(re.search(r"\((\d+) samples at 16000 Hz\)", user[0]).group(1))
    assert abs(samples - sent * FRAME_16K) <= FRAME_16K // 4, (samples, sent)
    heard = float(entries(page, "agent")[0].split("I heard ")[1].split(" seconds")[0])
    assert heard == round(samples / 16000, 2), (heard, samples)
    assert demo(page, "__demo.latencies")[0] >= 0  # the reply came after the release
    check_no_page_errors(page)


def test_switching_back_to_hands_free_reconnects_the_session(open_page):
    page = open_page("?mode=push-to-talk")
    first = connect(page)
    assert first["turnDetection"] == "manual"
    page.click("#ptt")  # a short press: one push-to-talk turn
    wait_for(page, "__demo.received.chunks.finish >= 1", 15)
    page.check("input[value=hands-free]")
    wait_for(page, "__demo.state === 'connected' && __demo.session.resumed === true", 10)
    assert demo(page, "__demo.session.sessionId") == first["sessionId"]
    assert demo(page, "__demo.session.turnDetection") == "server"
    assert not page.is_visible("#ptt")
    # Voice detection works again on the new socket: a spoken turn is answered.
    wait_for(page, "__demo.latencies.some((ms) => ms > 550)", 20)
    check_no_page_errors(page)


def test_switching_to_push_to_talk_reconnects_with_manual_turns(open_page):
    page = open_page()
    first = connect(page)
    assert first["turnDetection"] == "server"
    page.check("input[value=push-to-talk]")
    wait_for(page, "__demo.state === 'connected' && __demo.session.resumed === true", 10)
    assert demo(page, "__demo.session.sessionId") == first["sessionId"]
    assert demo(page, "__demo.session.turnDetection") == "manual"
    assert page.is_visible("#ptt")
    check_no_page_errors(page)


# ------------------------------------------------------------------ lifecycle


def test_disconnect_releases_mic_and_context(open_page):
    page = open_page()
    connect(page)
    live = demo(page, "__demo.resources()")
    assert live["context"] == "running" and live["tracks"] == ["live"] and live["socket"] == 1
    page.click("#disconnect")
    wait_for(page, "__demo.released !== null && __demo.state === 'idle'", 5)
    released = demo(page, "__demo.released")
    assert released == {"tracks": ["ended"], "context": "closed"}, released
    assert demo(page, "__demo.resources()") == {"context": None, "tracks": [], "socket": None}
    assert page.is_visible("#connect") and page.is_enabled("#connect")
    assert not page.is_visible("#disconnect")
    assert not page.is_enabled("#text")
    check_no_page_errors(page)


def test_reconnect_resumes_the_session(open_page):
    page = open_page("?mode=push-to-talk")
    first = connect(page)
    assert first["resumed"] is False
    page.fill("#text", "remember me")
    page.click("#send")
    wait_for(page, "__demo.received.chunks.finish >= 1")
    page.click("#disconnect")
    wait_for(page, "__demo.state === 'idle'")
    assert page.inner_text("#connect") == "Connect (resume)"
    second = connect(page)
    assert second["sessionId"] == first["sessionId"] and second["resumed"] is True
    assert {"role": "user", "text": "remember me"} in second["history"]
    # A reload (same storage) also resumes and shows the history.
    page.reload()
    third = connect(page)
    assert third["sessionId"] == first["sessionId"]
    assert "remember me" in entries(page, "user")
    page.fill("#text", "and again")
    page.click("#send")
    wait_for(page, "document.querySelectorAll('#log .entry.agent').length >= 2")
    assert "earlier turns in this session" in entries(page, "agent")[-1]
    check_no_page_errors(page)


def test_forget_clears_the_log_and_the_next_connect_starts_over(open_page):
    page = open_page("?mode=push-to-talk")
    first = connect(page)
    page.fill("#text", "forget me")
    page.click("#send")
    wait_for(page, "__demo.received.chunks.finish >= 1")
    page.click("#disconnect")
    wait_for(page, "__demo.state === 'idle'")
    page.click("footer summary")  # the settings hold the button
    page.click("#forget")
    assert entries(page, "user") == [] and entries(page, "agent") == []
    notice = "Session forgotten: the next Connect starts a new conversation."
    assert entries(page, "notice") == [notice]
    assert demo(page, "localStorage.getItem('audiocore.sessionId')") is None
    second = connect(page)
    assert second["resumed"] is False and second["sessionId"] != first["sessionId"]
    check_no_page_errors(page)


# ------------------------------------------------------------------ errors


def test_mic_denied_is_explained_and_typing_still_works(open_page):
    deny = """
      navigator.mediaDevices.getUserMedia = () =>
        Promise.reject(new DOMException("Permission denied", "NotAllowedError"));
    """
    page = open_page(init_script=deny)
    connect(page)
    assert "Microphone access was denied" in page.inner_text("#message")
    assert page.is_visible("#message")
    assert demo(page, "__demo.resources().tracks") == []
    page.fill("#text", "typing instead")
    page.click("#send")
    wait_for(page, "__demo.events.ended >= 1")
    assert any("typing instead" in text for text in entries(page, "agent"))


def test_unreachable_server_is_explained(open_page):
    page = open_page("?server=ws://127.0.0.1:9/ws")
    page.click("#connect")
    wait_for(page, "__demo.state === 'error'", 10)
    assert "Cannot reach the server" in page.inner_text("#message")
    released = demo(page, "__demo.released")
    assert released["context"] == "closed" and set(released["tracks"]) <= {"ended"}
    assert page.is_enabled("#connect")


def test_insecure_page_is_explained(browser, server_url):
    """Plain http on a name other than localhost: no worklets, no mic; say so."""
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(server_url.replace("127.0.0.1", INSECURE_HOST))
        assert page.evaluate("() => window.isSecureContext") is False
        page.click("#connect")
        assert "needs a secure address" in page.inner_text("#message")
        assert demo(page, "__demo.state") == "error"
        assert demo(page, "__demo.resources()")["context"] is None
    finally:
        context.close()


def test_socket_closed_by_the_server_is_explained(open_page, server_url):
    page = open_page("?mode=push-to-talk")
    routes = []

    def forward(route):
        routes.append(route)
        route.connect_to_server()

    page.route_web_socket("**/ws", forward)
    connect(page)
    # A close that means "do not come back" (a server failure, 1011, is
    # reconnected instead: tests/web/test_reconnect_page.py).
    routes[0].close(code=1008, reason="test policy")
    wait_for(page, "__demo.state === 'error'", 5)
    message = page.inner_text("#message")
    assert "refused the connection" in message and "1008" in message and "Press Connect" in message
    assert len(routes) == 1  # no second socket
    assert demo(page, "__demo.released") == {"tracks": ["ended"], "context": "closed"}


# ------------------------------------------------------------------ page


def test_every_control_has_an_accessible_name(open_page):
    page = open_page()
    nameless = page.evaluate(
        """() => [...document.querySelectorAll('button, input, [role=meter]')]
            .filter((el) => {
              const label = el.labels?.[0]?.textContent || el.getAttribute('aria-label')
                || (el.getAttribute('aria-labelledby') &&
                    document.getElementById(el.getAttribute('aria-labelledby'))?.textContent)
                || (el.tagName === 'BUTTON' && el.textContent);
              return !label || !label.trim();
            })
            .map((el) => el.outerHTML)"""
    )
    assert nameless == []


def test_js_units_pass_under_node():
    """The pure helpers' unit tests (node --test), so `pytest` runs them too."""
    node = shutil.which("node")
    if node is None:
        missing("node is not installed")
    files = sorted(str(p) for p in (ROOT / "tests" / "web" / "js").glob("*.test.mjs"))
    result = subprocess.run(
        [node, "--test", *files], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    summary = {
        key: int(value)
        for key, value in (
            line[2:].split(" ", 1) for line in result.stdout.splitlines() if line.startswith("# ")
        )
        if key in ("pass", "fail")
    }
    assert summary["fail"] == 0 and summary["pass"] >= 30, json.dumps(summary)
