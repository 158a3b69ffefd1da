"""Reading the body of ``POST /sessions/{id}/messages/``: one message or an all-or-nothing batch.

Every message is validated (sessions_app.messages.validate_message) before anything is stored,
so one bad message in a batch rejects the whole request and nothing is appended.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from openclaw_site.errors import ApiError
from sessions_app.messages import MessageError, MessageInput, validate_message


@dataclass(frozen=True)
class MessagePayload:
    """The validated messages of a request, and whether the caller asked for an assistant reply."""

    messages: tuple[MessageInput, ...]
    respond: bool = False
    is_batch: bool = False
    stream: bool = False


def message_api_error(error: MessageError, *, index: int | None = None) -> ApiError:
    """Turn a MessageError into the API error: 413 when too large, else 400 with the field (and index)."""
    details: dict[str, Any] = {"field": error.field}
    message = error.message
    if index is not None:
        details["index"] = index
        message = f"messages[{index}]: {message}"
    return ApiError(error.code, message, status_code=413 if error.too_large else 400, details=details)


def parse_message_payload(data: Any, *, max_message_bytes: int, max_batch: int) -> MessagePayload:
    """Validate a request body into messages, or raise the ApiError for the first problem."""
    if not isinstance(data, dict):
        raise ApiError("invalid_body", 'The body must be a message object or {"messages": [...]}.')
    if "messages" in data:
        return _parse_batch(data, max_message_bytes=max_message_bytes, max_batch=max_batch)
    fields = dict(data)
    respond = fields.pop("respond", False)
    stream = fields.pop("stream", False)
    for name, value in (("respond", respond), ("stream", stream)):
        if not isinstance(value, bool):
            raise ApiError("invalid_message", f"{name} must be true or false.", details={"field": name})
    if stream and not respond:
        raise ApiError(
            "invalid_message",
            'stream streams a reply: it needs "respond": true.',
            details={"field": "stream"},
        )
    message = _validate(fields, max_bytes=max_message_bytes, index=None)
    if respond and message.role != "user":
        raise ApiError(
            "invalid_message",
            "Only a user message can ask for a reply (respond).",
            details={"field": "respond"},
        )
    return MessagePayload(messages=(message,), respond=respond, stream=stream)


def _parse_batch(data: dict[str, Any], *, max_message_bytes: int, max_batch: int) -> MessagePayload:
    extra = sorted(set(data) - {"messages"})
    if extra:
        raise ApiError(
            "invalid_message", f"Unknown batch field(s): {', '.join(extra)}.", details={"field": extra[0]}
        )
    items = data["messages"]
    if not isinstance(items, list) or not items:
        raise ApiError("invalid_message", "messages must be a non-empty list.", details={"field": "messages"})
    if len(items) > max_batch:
        raise ApiError(
            "payload_too_large",
            f"The batch has {len(items)} messages; the limit is {max_batch}.",
            status_code=413,
            details={"field": "messages", "limit": max_batch},
        )
    for index, item in enumerate(items):
        for flag in ("respond", "stream"):
            if isinstance(item, dict) and flag in item:
                raise ApiError(
                    "invalid_message",
                    f"messages[{index}]: {flag} is only accepted on a single message.",
                    details={"field": flag, "index": index},
                )
    inputs = tuple(_validate(item, max_bytes=max_message_bytes, index=i) for i, item in enumerate(items))
    return MessagePayload(messages=inputs, is_batch=True)


def _validate(item: Any, *, max_bytes: int, index: int | None) -> MessageInput:
    try:
        return validate_message(item, max_bytes=max_bytes)
    except MessageError as error:
        raise message_api_error(error, index=index) from None
