"""An AI SDK client's chat messages (the body of a /ws ``message``, and of an
HTTP chat request): pure decoding of what is new in its resubmitted history
into a ``ChatSubmit``. No I/O here.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from . import fields
from .fields import IMAGE_TYPES, Image, InputError, Limits, ToolApproval, ToolResult


@dataclasses.dataclass(frozen=True)
class ChatSubmit:
    """An AI SDK client's ``message``: what is new in its resubmitted history.

    Only the last message counts (the history is never replayed into the live
    model): a user message is a new turn (its text and images); an assistant
    message carries the answers to the tool calls it holds.
    """

    text: str | None
    images: tuple[Image, ...]
    answers: tuple[ToolApproval | ToolResult, ...]


def decode_chat(obj: dict[str, Any], limits: Limits) -> ChatSubmit:
    """What is new in an AI SDK client's ``messages``: the body of a
    ``message`` (also of an HTTP chat request)."""
    # {"messages": [...]} (AI SDK clients, the seed's BIDI transport) or the
    # seeds' older {"data": {"messages": [...]}}.
    holder = obj.get("data") if "messages" not in obj else obj
    messages = holder.get("messages") if isinstance(holder, dict) else None
    if not isinstance(messages, list) or not messages:
        raise InputError('message: expected a non-empty "messages" array')
    if len(messages) > limits.max_history_messages:
        raise InputError(
            f"message: {len(messages)} messages exceeds the limit of {limits.max_history_messages}"
        )
    last = messages[-1]
    if not isinstance(last, dict):
        raise InputError("message: expected each message to be an object")
    role = last.get("role")
    parts = last.get("parts")
    if parts is None and isinstance(last.get("content"), str):
        parts = [{"type": "text", "text": last["content"]}]
    attachments = last.get("experimental_attachments")
    if attachments is not None:
        # The seed's older client: {"role": "user", "content": "",
        # "experimental_attachments": [{"type": "text", "text"},
        # {"type": "image", "data": b64, "media_type"}]}, read as parts.
        if not isinstance(attachments, list):
            raise InputError('message: expected "experimental_attachments" to be an array')
        parts = (parts if isinstance(parts, list) else []) + attachments
    if not isinstance(parts, list):
        raise InputError('message: expected the last message to have a "parts" array')
    if len(parts) > limits.max_message_parts:
        raise InputError(
            f"message: {len(parts)} parts exceeds the limit of {limits.max_message_parts}"
        )
    if role == "user":
        return _user_message(parts, limits)
    if role == "assistant":
        answers = _tool_answers(parts, limits)
        payloads = _approval_payloads(obj.get("approvalPayloads"), limits)
        return ChatSubmit(None, (), tuple(_with_payloads(answers, payloads)))
    raise InputError(
        f'message: the last message\'s role must be "user" or "assistant", got {role!r}'
    )


def _approval_payloads(value: Any, limits: Limits) -> dict[str, Any]:
    """``approvalPayloads``: ``{approvalId: payload}`` beside the messages —
    how an AI SDK app answers a confirmation's payload, whose
    ``addToolApprovalResponse`` writes no payload into the part (the app
    passes it in the request's ``body``; docs/confirmation.md)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError(
            'message: expected "approvalPayloads" to be an object of approval id -> payload'
        )
    if len(value) > limits.max_message_parts:
        raise InputError(
            f"message: {len(value)} approvalPayloads exceeds the limit of "
            f"{limits.max_message_parts}"
        )
    return {
        fields.identifier(key, "message approvalPayloads key", limits): fields.approval_payload(
            payload, f"message approvalPayloads[{key!r}]"
        )
        for key, payload in value.items()
    }


def _with_payloads(
    answers: list[ToolApproval | ToolResult], payloads: dict[str, Any]
) -> list[ToolApproval | ToolResult]:
    """Each approval with its payload from ``approvalPayloads`` where the
    part itself has none; an entry for an approval the message does not
    answer is not used (an app may send the same body with every request)."""
    if not payloads:
        return answers
    return [
        dataclasses.replace(answer, payload=payloads[answer.approval_id])
        if isinstance(answer, ToolApproval)
        and answer.payload is None
        and answer.approval_id in payloads
        else answer
        for answer in answers
    ]


def _user_message(parts: list[Any], limits: Limits) -> ChatSubmit:
    # Counted before any is decoded.
    files = sum(1 for p in parts if isinstance(p, dict) and p.get("type") in ("file", "image"))
    if files > limits.max_message_images:
        raise InputError(
            f"message: {files} images exceeds the limit of {limits.max_message_images}"
        )
    texts: list[str] = []
    images: list[Image] = []
    for part in parts:
        if not isinstance(part, dict):
            raise InputError("message: expected each part to be an object")
        kind = part.get("type")
        if kind == "text":
            text = part.get("text")
            if not isinstance(text, str):
                raise InputError('message: a text part needs a string "text"')
            texts.append(text)
        elif kind == "file":
            images.append(_file_part(part, limits))
        elif kind == "image":
            images.append(_image_part(part, limits))
        # Other parts (step-start, data-*, reasoning) carry nothing for the model.
    text = "\n".join(t for t in texts if t.strip())
    if not text and not images:
        raise InputError("message: the user message has no text and no image")
    if len(text) > limits.max_text_chars:
        raise InputError(
            f"message: {len(text)} characters exceeds the limit of {limits.max_text_chars}"
        )
    return ChatSubmit(text or None, tuple(images), ())


def _file_part(part: dict[str, Any], limits: Limits) -> Image:
    media_type = part.get("mediaType")
    if media_type not in IMAGE_TYPES:
        raise InputError(
            f"message: a file part's mediaType must be one of {list(IMAGE_TYPES)}, "
            f"got {media_type!r}"
        )
    url = part.get("url")
    prefix = f"data:{media_type};base64,"
    if not isinstance(url, str) or not url.startswith(prefix):
        raise InputError(f'message: a file part\'s "url" must be a data URL ({prefix}…)')
    return fields.image(media_type, url[len(prefix) :], limits)


def _image_part(part: dict[str, Any], limits: Limits) -> Image:
    """The seed's image part: ``{"type": "image", "data": b64, "media_type"}``
    (its default type ``image/png``)."""
    media_type = part.get("media_type", part.get("mediaType", "image/png"))
    return fields.image(media_type, part.get("data"), limits)


def _tool_answers(parts: list[Any], limits: Limits) -> list[ToolApproval | ToolResult]:
    """The answers an assistant message's tool parts carry (AI SDK v6 states)."""
    answers: list[ToolApproval | ToolResult] = []
    for part in parts:
        if not isinstance(part, dict):
            raise InputError("message: expected each part to be an object")
        kind = part.get("type")
        if not isinstance(kind, str) or not (kind.startswith("tool-") or kind == "dynamic-tool"):
            continue
        state = part.get("state")
        call_id = part.get("toolCallId")
        approval = part.get("approval")
        if isinstance(approval, dict) and isinstance(approval.get("approved"), bool):
            # approval-responded, and also output-available/-error after an
            # approval: the client may send the approval and the result together.
            answers.append(
                ToolApproval(
                    fields.identifier(approval.get("id"), "message approval.id", limits),
                    approval["approved"],
                    fields.optional_text(approval.get("reason"), "message approval.reason", limits),
                    from_history=True,
                    payload=fields.approval_payload(
                        approval.get("payload"), "message approval.payload"
                    ),
                )
            )
        if state == "output-available":
            call = fields.identifier(call_id, "message toolCallId", limits)
            answers.append(ToolResult(call, output=part.get("output"), from_history=True))
        elif state == "output-error":
            call = fields.identifier(call_id, "message toolCallId", limits)
            error = fields.optional_text(part.get("errorText"), "message errorText", limits)
            answers.append(
                ToolResult(call, error_text=error or "the tool failed", from_history=True)
            )
    return answers
