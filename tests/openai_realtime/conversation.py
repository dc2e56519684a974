"""One session of the local OpenAI Realtime endpoint: the client's events
checked (``wire.py``) and answered in the GA event sequences, with
consistent response, item, output and content ids."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import TYPE_CHECKING, Any

from websockets.asyncio.server import ServerConnection

from audiocore_server.offline import call_cues
from audiocore_server.offline.model import _cued_calls, audio_cue

from . import wire

if TYPE_CHECKING:
    from .server import ConnectionRecord, LocalOpenAIRealtime

RATE = wire.RATE
NO_ASR = "[local OpenAI Realtime: no speech recognition]"
Event = dict[str, Any]

DEFAULT_SESSION: Event = {
    "type": "realtime",
    "object": "realtime.session",
    "model": "",
    "output_modalities": ["audio"],
    "instructions": "",
    "tools": [],
    "tool_choice": "auto",
    "max_output_tokens": "inf",
    "audio": {
        "input": {
            "format": dict(wire.PCM_FORMAT),
            "transcription": None,
            "noise_reduction": None,
            "turn_detection": {
                "type": "server_vad",
                "threshold": 0.5,
                "prefix_padding_ms": 300,
                "silence_duration_ms": 500,
                "create_response": True,
                "interrupt_response": True,
            },
        },
        "output": {"format": dict(wire.PCM_FORMAT), "voice": "marin", "speed": 1.0},
    },
}


def _merge(into: Event, update: Event) -> None:
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict) and key != "turn_detection":
            _merge(into[key], value)
        else:
            into[key] = value


def describe(pcm: bytes) -> str:
    n = len(pcm) // 2
    return f"{NO_ASR} {n} samples at {RATE} Hz ({n / RATE:.2f} s)"


def _pieces(words: str, count: int) -> list[str]:
    """``words`` in at most ``count`` deltas that join back to it."""
    split = words.split(" ")
    count = max(1, min(count, len(split)))
    size = -(-len(split) // count)
    groups = [" ".join(split[i : i + size]) for i in range(0, len(split), size)]
    return [g if i == 0 else " " + g for i, g in enumerate(groups)]


def _b64(pcm: bytes) -> str:
    return base64.b64encode(pcm).decode("ascii")


class _Session:
    def __init__(
        self, endpoint: LocalOpenAIRealtime, ws: ServerConnection, record: ConnectionRecord
    ) -> None:
        self.endpoint = endpoint
        self.ws = ws
        self.record = record
        self.config: Event = json.loads(json.dumps(DEFAULT_SESSION))
        self.config["model"] = record.query["model"][0]
        self.buffer: list[bytes] = []  # audio not committed (manual turns, or before speech)
        self.detector: Any = None  # server VAD; None: manual turns
        self.audio_ms = 0  # all audio appended, as the service counts speech times
        self.pending_input: Event | None = None  # what the next response answers
        self.calls: dict[str, str] = {}  # call_id → name, every call issued
        self.answered: set[str] = set()
        self.outputs: list[tuple[str, str]] = []  # (name, output) since the last response
        self.audio_items: dict[str, int] = {}  # assistant item → its audio in ms
        self.responding: asyncio.Task[None] | None = None
        self._configure()

    # ------------------------------------------------------------ plumbing
    async def send(self, event: Event) -> None:
        event.setdefault("event_id", self.endpoint.new_id("event"))
        await self.ws.send(json.dumps(event))
        self.endpoint.update(lambda: self.record.sent.append(event["type"]))

    async def error(self, message: str, code: str, param: str | None, event_id: Any) -> None:
        error = {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "code": code,
                "message": message,
                "param": param,
                "event_id": event_id,
            },
        }
        self.endpoint.update(lambda: self.record.errors.append(error["error"]))
        await self.send(error)

    def stop(self) -> None:
        if self.responding is not None:
            self.responding.cancel()

    async def _fail(self, how: str) -> None:
        """An answer fails mid-way (``LocalOpenAIRealtime.fail_next``)."""
        if how == "stall":
            await asyncio.Future()  # never resolved: cancelled when the session ends
        if how == "expire":
            await self.expire()
        else:
            self.ws.transport.abort()  # the service is gone mid-answer
        raise asyncio.CancelledError

    async def expire(self) -> None:
        message = "Your session hit the maximum duration of 60 minutes."
        await self.error(message, "session_expired", None, None)
        await self.ws.close(1001, message)

    def _configure(self) -> None:
        detection = self.config["audio"]["input"]["turn_detection"]
        if detection is None:
            self.detector = None
        else:
            from .server import _Segmenter

            self.detector = _Segmenter(
                self.endpoint.config,
                detection.get("silence_duration_ms", self.endpoint.config.silence_ms),
                detection.get("prefix_padding_ms", self.endpoint.config.prefix_ms),
            ).detector

    # ------------------------------------------------------------ the client's events
    async def run(self) -> None:
        await self.send({"type": "session.created", "session": self.config})
        async for message in self.ws:
            event: Any = None
            try:
                event = json.loads(message)
                await self.on_event(wire.check_event(event))
            except ValueError as exc:  # not JSON, or a wire.InvalidEvent
                code = getattr(exc, "code", "invalid_json")
                param = getattr(exc, "param", None)
                event_id = event.get("event_id") if isinstance(event, dict) else None
                await self.error(str(exc), code, param, event_id)

    async def on_event(self, event: Event) -> None:
        kind = event["type"]
        shown = dict(event)
        if kind == "input_audio_buffer.append":
            pcm = wire.decode_audio(event.get("audio"))
            shown["audio"] = len(pcm) // 2
            self.endpoint.update(lambda: self._note(shown, len(pcm) // 2))
            await self._append(pcm)
            return
        self.endpoint.update(lambda: self.record.received.append(shown))
        if kind == "session.update":
            session = wire.check_session(event.get("session"))
            self.endpoint.update(lambda: self.record.updates.append(session))
            _merge(self.config, session)
            self._configure()
            self.endpoint.update(lambda: setattr(self.record, "session", self.config))
            await self.send({"type": "session.updated", "session": self.config})
        elif kind == "input_audio_buffer.commit":
            await self._commit(event)
        elif kind == "input_audio_buffer.clear":
            self.buffer.clear()
            await self.send({"type": "input_audio_buffer.cleared"})
        elif kind == "conversation.item.create":
            await self._item(event)
        elif kind == "conversation.item.truncate":
            item_id, end = wire.check_truncate(event, self.audio_items)
            self.endpoint.update(lambda: self.record.truncations.append((item_id, end)))
            await self.send(
                {
                    "type": "conversation.item.truncated",
                    "item_id": item_id,
                    "content_index": 0,
                    "audio_end_ms": end,
                }
            )
        elif kind == "response.create":
            if self.responding is not None and not self.responding.done():
                raise wire.InvalidEvent(
                    "Conversation already has an active response in progress.",
                    code="conversation_already_has_active_response",
                )
            self._answer()
        elif kind == "response.cancel":
            if not await self._cancel("client_cancelled"):
                raise wire.InvalidEvent(
                    "Cancellation failed: no active response found.",
                    code="response_cancel_not_active",
                )
        else:
            raise wire.InvalidEvent(f"'{kind}' is not supported by this endpoint", param="type")

    def _note(self, shown: Event, samples: int) -> None:
        self.record.received.append(shown)
        self.record.audio_in += samples

    async def _append(self, pcm: bytes) -> None:
        self.audio_ms += len(pcm) * 1000 // (2 * RATE)
        if self.detector is None:
            self.buffer.append(pcm)
            return
        was_active = self.detector.active
        found = self.detector.feed(pcm)
        if found == "onset":
            await self.send(
                {
                    "type": "input_audio_buffer.speech_started",
                    "audio_start_ms": self.audio_ms,
                    "item_id": self.endpoint.new_id("item"),
                }
            )
            if self.config["audio"]["input"]["turn_detection"].get("interrupt_response", True):
                await self._cancel("turn_detected")
        elif was_active and not self.detector.active:
            await self.send(
                {"type": "input_audio_buffer.speech_stopped", "audio_end_ms": self.audio_ms}
            )
            if isinstance(found, bytes):
                await self._user_audio(found)
                if self.config["audio"]["input"]["turn_detection"].get("create_response", True):
                    self._answer()

    async def _commit(self, event: Event) -> None:
        if self.detector is not None:  # server VAD: the speech heard so far
            pcm = self.detector.force_end() or b""
        else:
            pcm = b"".join(self.buffer)
        self.buffer.clear()
        if len(pcm) < RATE // 10 * 2:
            raise wire.InvalidEvent(
                "Error committing input audio buffer: buffer too small. Expected at least "
                f"100ms of audio, but buffer only has {len(pcm) / 48:.2f}ms of audio.",
                code="input_audio_buffer_commit_empty",
            )
        await self._user_audio(pcm)

    async def _user_audio(self, pcm: bytes) -> None:
        item_id = self.endpoint.new_id("item")
        await self.send({"type": "input_audio_buffer.committed", "item_id": item_id})
        item = {
            "id": item_id,
            "type": "message",
            "role": "user",
            "content": [{"type": "input_audio", "transcript": None}],
        }
        await self.send({"type": "conversation.item.added", "item": item})
        await self.send({"type": "conversation.item.done", "item": item})
        if self.config["audio"]["input"].get("transcription"):
            await self.send(
                {
                    "type": "conversation.item.input_audio_transcription.completed",
                    "item_id": item_id,
                    "content_index": 0,
                    "transcript": describe(pcm),
                }
            )
        self.endpoint.update(lambda: self.record.echoed.append(pcm))
        self.pending_input = {"audio": pcm}

    async def _item(self, event: Event) -> None:
        item = wire.check_item(event.get("item"), self.calls, self.answered)
        item_id = item.get("id") or self.endpoint.new_id("item")
        if item["type"] == "function_call":
            # A call given back to rebuild a conversation on a new session:
            # its output may follow.
            self.calls[item["call_id"]] = item["name"]
        elif item["type"] == "function_call_output":
            self.answered.add(item["call_id"])
            self.outputs.append((self.calls[item["call_id"]], item["output"]))
        elif item["role"] == "user":
            texts = [p["text"] for p in item["content"] if p["type"] == "input_text"]
            if texts:
                self.pending_input = {"text": " ".join(texts)}
        added = {**item, "id": item_id}
        await self.send({"type": "conversation.item.added", "item": added})
        await self.send({"type": "conversation.item.done", "item": added})

    # ------------------------------------------------------------ answers
    def _answer(self) -> None:
        if self.endpoint.fail_next_answer == "silent":
            self.endpoint.fail_next_answer = None
            return  # the answer is never started: the client waits for ever
        if self.outputs:
            outputs, self.outputs = self.outputs, []
            words = " ".join(f"{name} returned {output}." for name, output in outputs)
            plan: Event = {"words": words, "audio": audio_cue()}
        elif self.pending_input is not None and "audio" in self.pending_input:
            pcm = self.pending_input["audio"]
            words = f"I heard {len(pcm) / 2 / RATE:.2f} seconds of audio. Here it is back."
            plan = {"words": words, "audio": pcm}
        else:
            text = (self.pending_input or {}).get("text", "")
            calls = self._calls_for(text)
            plan = (
                {"calls": calls} if calls else {"words": f"You said: {text}", "audio": audio_cue()}
            )
        self.pending_input = None
        self.responding = asyncio.get_running_loop().create_task(self._respond(plan))

    def _calls_for(self, text: str) -> list[tuple[str, dict[str, Any]]]:
        names = {tool["name"] for tool in self.config.get("tools") or []}
        cued = call_cues.read(text, names)
        if cued is not None:
            return cued.calls  # none when refused: this fake answers "You said"
        return _cued_calls(text, names)

    async def _cancel(self, reason: str) -> bool:
        task = self.responding
        if task is None or task.done():
            return False
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await self.send(
            {
                "type": "response.done",
                "response": {
                    "id": self._response_id,
                    "object": "realtime.response",
                    "status": "cancelled",
                    "status_details": {"type": "cancelled", "reason": reason},
                    "output": [],
                },
            }
        )
        return True

    async def _respond(self, plan: Event) -> None:
        endpoint = self.endpoint
        response_id = self._response_id = endpoint.new_id("resp")
        base = {"id": response_id, "object": "realtime.response"}
        await self.send({"type": "response.created", "response": {**base, "status": "in_progress"}})
        limited = endpoint.rate_limited_answers > 0
        if limited:
            endpoint.rate_limited_answers -= 1
        await self.send(
            {
                "type": "rate_limits.updated",
                "rate_limits": [
                    {
                        "name": "requests",
                        "limit": 1,
                        "remaining": 0 if limited else 1,
                        "reset_seconds": 20.0,
                    },
                ],
            }
        )
        if limited:
            error = {
                "type": "requests",
                "code": "rate_limit_exceeded",
                "message": "Rate limit reached for requests per min (RPM): limit 1, used 1, "
                "requested 1. Please try again in 20s.",
            }
            await self.send(
                {
                    "type": "response.done",
                    "response": {
                        **base,
                        "status": "failed",
                        "status_details": {"type": "failed", "error": error},
                        "output": [],
                    },
                }
            )
            return
        if "calls" in plan:
            output = [
                await self._call(response_id, i, n, a) for i, (n, a) in enumerate(plan["calls"])
            ]
            usage = {"total_tokens": 20, "input_tokens": 10, "output_tokens": 10}
        else:
            output = [await self._speak(response_id, plan["words"], plan["audio"])]
            usage = {
                "input_tokens": 10,
                "output_tokens": len(plan["words"].split()),
                "total_tokens": 10 + len(plan["words"].split()),
            }
        await self.send(
            {
                "type": "response.done",
                "response": {**base, "status": "completed", "output": output, "usage": usage},
            }
        )

    async def _call(self, response_id: str, index: int, name: str, args: Event) -> Event:
        item_id, call_id = self.endpoint.new_id("item"), self.endpoint.new_id("call")
        arguments = json.dumps(args)
        item = {
            "id": item_id,
            "type": "function_call",
            "call_id": call_id,
            "name": name,
            "arguments": "",
            "status": "in_progress",
        }
        where = {"response_id": response_id, "item_id": item_id, "output_index": index}
        await self.send(
            {
                "type": "response.output_item.added",
                "response_id": response_id,
                "output_index": index,
                "item": item,
            }
        )
        await self.send(
            {
                "type": "response.function_call_arguments.delta",
                **where,
                "call_id": call_id,
                "delta": arguments,
            }
        )
        await self.send(
            {
                "type": "response.function_call_arguments.done",
                **where,
                "call_id": call_id,
                "name": name,
                "arguments": arguments,
            }
        )
        done = {**item, "arguments": arguments, "status": "completed"}
        await self.send(
            {
                "type": "response.output_item.done",
                "response_id": response_id,
                "output_index": index,
                "item": done,
            }
        )
        self.calls[call_id] = name
        return done

    async def _speak(self, response_id: str, words: str, pcm: bytes) -> Event:
        endpoint, config = self.endpoint, self.endpoint.config
        item_id = endpoint.new_id("item")
        item = {
            "id": item_id,
            "type": "message",
            "role": "assistant",
            "status": "in_progress",
            "content": [],
        }
        where = {
            "response_id": response_id,
            "item_id": item_id,
            "output_index": 0,
            "content_index": 0,
        }
        await self.send(
            {
                "type": "response.output_item.added",
                "response_id": response_id,
                "output_index": 0,
                "item": item,
            }
        )
        await self.send({"type": "conversation.item.added", "item": item})
        await self.send(
            {
                "type": "response.content_part.added",
                **where,
                "part": {"type": "audio", "transcript": ""},
            }
        )
        self.audio_items[item_id] = 0
        step = config.audio_chunk_ms * RATE // 1000 * 2
        chunks = [pcm[i : i + step] for i in range(0, len(pcm), step)]
        pieces = _pieces(words, len(chunks))
        per_burst = max(1, config.burst_ms // config.audio_chunk_ms)
        fail = endpoint.fail_next_answer
        endpoint.fail_next_answer = None
        sent = 0
        for k, chunk in enumerate(chunks):
            if k == 1 and fail is not None:
                await self._fail(fail)  # after the answer's first audio
            if k and k % per_burst == 0:
                await asyncio.sleep(config.burst_ms / 1000 / config.speed)
            await self.send({"type": "response.output_audio.delta", **where, "delta": _b64(chunk)})
            sent += len(chunk) // 2
            self.audio_items[item_id] = sent * 1000 // RATE  # what may be truncated
            if k < len(pieces):
                await self.send(
                    {"type": "response.output_audio_transcript.delta", **where, "delta": pieces[k]}
                )
        await self.send({"type": "response.output_audio.done", **where})
        await self.send(
            {"type": "response.output_audio_transcript.done", **where, "transcript": words}
        )
        await self.send(
            {
                "type": "response.content_part.done",
                **where,
                "part": {"type": "audio", "transcript": words},
            }
        )
        done = {
            **item,
            "status": "completed",
            "content": [{"type": "output_audio", "transcript": words}],
        }
        await self.send(
            {
                "type": "response.output_item.done",
                "response_id": response_id,
                "output_index": 0,
                "item": done,
            }
        )
        await self.send({"type": "conversation.item.done", "item": done})
        return done
