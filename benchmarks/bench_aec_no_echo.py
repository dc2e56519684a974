"""A line with no echo: what each echo canceller does to a near end that
talks over the far end and on after it, when nothing of the far end
reaches the microphone (a headset, most phone calls).

    python benchmarks/bench_aec_no_echo.py [--scenes 20] [--seed 1] [--rate 16000]
    python benchmarks/bench_aec_no_echo.py --smoke   # two scenes (CI)

Each scene (seeded): the far end (espeak-ng voice "en", as bench_aec.py
makes it) for 4-6 s; the near end (voice "en+f3") starting 0.5-3 s into it
and talking 1-2 s past its end, 10 dB below to 6 dB above it; noise at
-50 dBFS; no echo path at all, so the right output is the microphone.
Every contender gets 10 ms frames of PCM16, as in bench_aec.py (speexdsp
and WebRTC with their suppressors, as there; WebRTC at 16 kHz only).

Measured against the microphone (each contender's latency taken off): the
segmental SNR (20 ms segments where the near end talks, clamped to
[-10, 35] dB, so 35 is untouched) over the double talk and over the 0.5 s
after the far end stops, where a false echo path learnt in the double talk
still rings; the energy the near end lost over that 0.5 s (dB); and in how
many scenes any output sample differs from the microphone's by more than
2 LSB of PCM16.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_aec import (  # noqa: E402
    FAR_TEXT,
    NEAR_TEXT,
    Microphone,
    Ours,
    Scene,
    Speex,
    WebRTC,
    build_webrtc_shim,
    header,
    run,
    segmental_snr,
    speech,
)

AFTER_S = 0.5
NOISE_DBFS = -50.0


def make_scene(rng, rate: int, far_speech, near_speech, name: str) -> Scene:
    far_s = rng.uniform(4.0, 6.0)
    start = rng.uniform(0.5, 3.0)
    end = far_s + rng.uniform(1.0, 2.0)
    frame = rate // 100  # bench_aec.run's 10 ms frames, whole
    n = int((end + 0.5) * rate) // frame * frame
    far = np.zeros(n, np.float32)
    far[: int(far_s * rate)] = far_speech[: int(far_s * rate)]
    a, b = int(start * rate), int(end * rate)
    offset = int(rng.integers(0, len(near_speech) - (b - a)))
    talk = np.zeros(n)
    talk[a:b] = near_speech[offset : offset + b - a]
    level = np.sqrt(np.mean(far[: int(far_s * rate)] ** 2) / max(np.mean(talk[a:b] ** 2), 1e-12))
    talk *= level * 10 ** (rng.uniform(-10.0, 6.0) / 20)
    mic = talk + rng.standard_normal(n) * 10 ** (NOISE_DBFS / 20)
    return Scene(
        name,
        rate,
        far,
        mic.astype(np.float32),
        talk.astype(np.float32),
        np.zeros(n, np.float32),
        far_s,
        end,
        0.0,
        f"far end 0-{far_s:.1f} s, near end {start:.1f}-{end:.1f} s",
    )


def measure(scene: Scene, out: np.ndarray) -> dict[str, float]:
    r = scene.rate
    mic = np.clip(np.round(scene.near * 32768), -32768, 32767) / 32768  # as PCM16 carries it
    start = int(np.argmax(scene.clean != 0))
    stop = int(scene.t1 * r)
    after = slice(stop, stop + int(AFTER_S * r))
    lost = np.sum(mic[after] ** 2) / max(float(np.sum(out[after] ** 2)), 1e-20)
    return {
        "dt": segmental_snr(mic[start:stop], out[start:stop], r),
        "after": segmental_snr(mic[after], out[after], r),
        "lost": float(10 * np.log10(lost)),
        # the contenders' zeros at the end (run() takes their latency off) left out
        "changed": float(np.max(np.abs(out[: -r // 10] - mic[: -r // 10])) > 2 / 32768),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenes", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rate", type=int, default=16000, choices=[8000, 16000, 24000, 48000])
    parser.add_argument("--smoke", action="store_true", help="two scenes (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.scenes = 2
    for tool in ("espeak-ng", "g++", "pkg-config"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is not installed")

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        contenders = [Microphone, Ours, Speex]
        if args.rate == 16000:
            WebRTC.library = build_webrtc_shim(folder)
            contenders.append(WebRTC)
        far_speech = speech(FAR_TEXT, "en", args.rate, 7.0, folder)
        near_speech = speech(NEAR_TEXT, "en+f3", args.rate, 12.0, folder)
        header()
        results: dict[str, list[dict[str, float]]] = {c.name: [] for c in contenders}
        for k in range(args.scenes):
            rng = np.random.default_rng(args.seed * 1000 + k)
            scene = make_scene(rng, args.rate, far_speech, near_speech, f"{k}")
            for c in contenders:
                out, _ = run(c, scene, 300.0)
                assert len(out) == len(scene.near) and np.all(np.isfinite(out))
                results[c.name].append(measure(scene, out))
        print(f"\n## {args.scenes} scenes with no echo ({args.rate} Hz)")
        print(
            "| contender | double-talk segSNR dB (mean / worst) | after the far end: segSNR dB "
            "(mean / worst) | lost after dB (mean / worst) | scenes changed |"
        )
        print("|---|---|---|---|---|")
        for c in contenders:
            rows = results[c.name]
            col = {key: np.array([m[key] for m in rows]) for key in rows[0]}
            print(
                f"| {c.name} | {col['dt'].mean():.1f} / {col['dt'].min():.1f} | "
                f"{col['after'].mean():.1f} / {col['after'].min():.1f} | "
                f"{col['lost'].mean():.1f} / {col['lost'].max():.1f} | "
                f"{int(col['changed'].sum())} of {len(rows)} |"
            )


if __name__ == "__main__":
    main()
