"""What sending audio to Gemini costs the server: CPU per message of ADK's
Gemini connection (google-genai: pydantic, JSON, base64; websockets; TLS)
against the local Gemini Live endpoint, by chunk size.

    python benchmarks/bench_gemini_send.py
    python benchmarks/bench_gemini_send.py --seconds 60 --chunks 20,40,50,100

The profile of the production path (bench_server.py --py-spy) shows this
send path as the server's largest cost; this isolates it. The endpoint runs
in its own process, so only the sender's CPU (this process) is counted.
Each chunk size streams the same number of seconds of audio (silence, so
the endpoint never answers); the blobs are built before the timed loop, and
a message the endpoint refused would close the socket and fail the next send.
"""

from __future__ import annotations

import argparse
import asyncio
import ssl
import time

from bench_server_client import local_gemini
from google import genai
from google.adk.models.gemini_llm_connection import GeminiLlmConnection
from google.adk.utils.variant_utils import GoogleLLMVariant
from google.genai import types

MODELS = ("gemini-3.8-live", "gemini-2.5-flash-native-audio-preview-12-2025")


async def measure(url: str, ca_file: str, key: str, seconds: int, chunks: list[int]) -> None:
    context = ssl.create_default_context(cafile=ca_file)
    client = genai.Client(
        api_key=key,
        http_options=types.HttpOptions(
            base_url=url, api_version="v1alpha", async_client_args={"ssl": context}
        ),
    )
    config = types.LiveConnectConfig(response_modalities=[types.Modality.AUDIO])
    print(f"{'model':>46} {'chunk':>6} {'µs CPU / message':>17} {'ms CPU / s of audio':>20}")
    for model in MODELS:
        async with client.aio.live.connect(model=model, config=config) as session:
            connection = GeminiLlmConnection(session, GoogleLLMVariant.GEMINI_API, model)
            for ms in chunks:
                blob = types.Blob(mime_type="audio/pcm;rate=16000", data=bytes(32 * ms))
                count = seconds * 1000 // ms
                for _ in range(10):  # warm up
                    await connection.send_realtime(blob)
                started = time.process_time()
                for _ in range(count):
                    await connection.send_realtime(blob)
                cpu = time.process_time() - started
                print(
                    f"{model:>46} {ms:>4}ms {1e6 * cpu / count:>17.1f} "
                    f"{1e3 * cpu / seconds:>20.2f}",
                    flush=True,
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=30, help="audio streamed per chunk size")
    parser.add_argument("--chunks", default="20,50,100", help="chunk sizes in ms")
    args = parser.parse_args()
    chunks = [int(v) for v in args.chunks.split(",")]
    with local_gemini() as endpoint:
        asyncio.run(measure(endpoint.url, endpoint.ca_file, endpoint.api_key, args.seconds, chunks))


if __name__ == "__main__":
    main()
