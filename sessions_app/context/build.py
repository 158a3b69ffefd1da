"""Building the model's context: what a session's next model call is sent (the view, pruned, after the system prompt) and what it is made of."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import ClassVar, TypedDict

from django.utils import timezone as dj_timezone

from memory_app.tokens import (
    EstimateMemo,
    active_memo,
    corrected_estimate,
    estimate_message_tokens,
    estimate_text_tokens,
)
from openclaw_site.models import Assistant
from openclaw_site.teams.assistant_settings import PruningSettings
from providers.message_types import AgentMessage, ChatMessage, ToolSpec
from providers.openai_chat import EncodedMessages, convert_messages, settle_openai_messages, tool_flags_of
from sessions_app.context import view_cache
from sessions_app.context.figures import calibration_ratio, effective_model
from sessions_app.context.prompt import SystemPrompt, build_system_prompt
from sessions_app.context.pruning import PruneResult, prune_context, should_prune
from sessions_app.context.view import session_view
from sessions_app.messages import epoch_ms
from sessions_app.models import Session


class PruneChangeDict(TypedDict):
    index: int
    entry_id: str | None
    tool_name: str | None
    action: str
    chars_before: int
    chars_after: int


class PruningDict(TypedDict):
    """`PruningReport` as the API shows it."""

    mode: str
    ran: bool
    reason: str
    changed: bool
    changes: list[PruneChangeDict]


@dataclass(frozen=True)
class PruningReport:
    """Whether pruning ran on this call, why, and what it changed."""

    mode: str
    ran: bool
    reason: str
    result: PruneResult

    @property
    def changed(self) -> bool:
        return self.result.changed

    def as_dict(self) -> PruningDict:
        return {
            "mode": self.mode,
            "ran": self.ran,
            "reason": self.reason,
            "changed": self.changed,
            "changes": [
                {
                    "index": c.index,
                    "entry_id": c.entry_id,
                    "tool_name": c.tool_name,
                    "action": c.action,
                    "chars_before": c.chars_before,
                    "chars_after": c.chars_after,
                }
                for c in self.result.changes
            ],
        }


def prune_view(
    messages: list[AgentMessage],
    *,
    assistant: Assistant,
    context_window: int,
    last_touch: datetime | None,
    now: datetime,
) -> PruningReport:
    """Run the TTL gate and, when it is open, OpenClaw's pruning pass on a copy of the view."""
    settings = assistant.config.pruning
    touch_ms = epoch_ms(last_touch) if last_touch else None
    if not should_prune(settings, now_ms=epoch_ms(now), last_cache_touch_at_ms=touch_ms):
        return PruningReport(
            settings.mode,
            False,
            _closed_reason(settings, touch_ms, epoch_ms(now)),
            PruneResult(list(messages)),
        )
    result = prune_context(messages, settings=settings, context_window=context_window)
    reason = (
        "mode always: every call"
        if settings.mode == "always"
        else "cache TTL expired since the last model call"
    )
    return PruningReport(settings.mode, True, reason, result)


def _closed_reason(settings: PruningSettings, touch_ms: int | None, now_ms: int) -> str:
    if settings.mode == "off":
        return "mode off"
    if settings.ttl_ms <= 0:
        return "ttl is 0: pruning disabled"
    if touch_ms is None:
        return "no model call recorded yet (cache-ttl waits for the first one)"
    remaining = max(0, settings.ttl_ms - (now_ms - touch_ms))
    return f"prompt cache still warm: the TTL expires in {remaining // 1000} s"


def record_cache_touch(session_id: int, *, at: datetime) -> None:
    """Record that the provider cache was touched at `at` (OpenClaw's `openclaw.cache-ttl` entry)."""
    Session.objects.filter(pk=session_id).update(**cache_touch_fields(at=at))


def cache_touch_fields(*, at: datetime) -> dict[str, datetime]:
    """Return the session fields a cache touch at `at` sets (for an update that sets more)."""
    return {"last_cache_touch_at": at}


@dataclass(frozen=True)
class ModelContext:
    """Exactly what a model call for this session sends now, and how it was made."""

    system_prompt: SystemPrompt
    view: list[AgentMessage]
    pruning: PruningReport
    tools: list[ToolSpec]
    model: str
    ratio: float | None
    now: datetime
    entries: list[view_cache.ViewEntry] = field(repr=False, default_factory=list)
    compaction_index: int = field(repr=False, default=-1)  # of the latest compaction in ``entries``
    # The estimates counted while building, which the figures below reuse (memory_app.tokens).
    estimates: EstimateMemo = field(repr=False, default_factory=EstimateMemo)
    # What earlier calls derived from the view's messages (sessions_app.context.view_cache).
    view_memo: view_cache.ViewMemo = field(repr=False, default_factory=view_cache.ViewMemo)

    @property
    def agent_messages(self) -> list[AgentMessage]:
        """Return the pruned AgentMessage list (what the model sees, before format conversion)."""
        return self.pruning.result.messages

    @cached_property
    def openai_messages(self) -> EncodedMessages:
        """Return the chat-completions `messages` exactly as sent (not to be changed).

        They carry their JSON, made of each message's kept encoding (`view_cache.ViewMemo`), which
        the model request splices in as it is.
        """
        memo = self.view_memo
        converted = memo.extended(
            "openai", self.agent_messages, lambda new: convert_messages(new, convert=memo.converted)
        )
        flags = memo.extended("tool-flags", converted, tool_flags_of)
        messages = settle_openai_messages(converted, system_prompt=self.system_prompt.text, tool_flags=flags)
        return EncodedMessages(messages, encode=self._encode_openai)

    def _encode_openai(self, messages: list[ChatMessage]) -> str:
        """Encode the request's messages; the system prompt, made anew each call, apart from the
        rest, whose kept encoding then still matches (`view_cache.ViewMemo.extended`)."""
        memo = self.view_memo
        if not self.system_prompt.text:
            return memo.json_array(messages, slot="openai-json")
        system, rest = memo.json(messages[0]), memo.json_array(messages[1:], slot="openai-json")
        return f"[{system}]" if rest == "[]" else f"[{system},{rest[1:]}"

    def messages_json(self) -> tuple[str, str]:
        """Return `openai_messages` and `agent_messages` as JSON arrays, each message encoded once."""
        return self.openai_messages.json(), self.view_memo.json_array(self.agent_messages, slot="agent-json")

    @cached_property
    def _message_estimates(self) -> tuple[int, int]:
        """Return the estimates of the summary messages and of the others, each counted once."""
        agent_messages = self.agent_messages
        memo = self.view_memo
        with self.estimates.active():
            tokens = memo.extended(
                "estimates", agent_messages, lambda new: [estimate_message_tokens(m) for m in new]
            )
        summaries = memo.extended(
            "summaries", agent_messages, lambda new: [m.get("role") == "compactionSummary" for m in new]
        )
        summary = sum(itertools.compress(tokens, summaries))  # kept per message: no pass over the view
        return summary, sum(tokens) - summary

    @cached_property
    def _tools_estimate(self) -> int:
        return estimate_text_tokens(json.dumps(self.tools, ensure_ascii=False)) if self.tools else 0

    @property
    def raw_prompt_estimate(self) -> int:
        """Estimate the whole request: system prompt, messages and tool specs (uncorrected)."""
        return (
            estimate_text_tokens(self.system_prompt.text)
            + sum(self._message_estimates)
            + self._tools_estimate
        )

    @property
    def prompt_estimate(self) -> int:
        """Return the request estimate corrected by the model's calibration ratio."""
        return corrected_estimate(self.raw_prompt_estimate, self.ratio)

    def breakdown(self, *, context_window: int) -> ContextBreakdown:
        """Split the request's estimate into its parts (corrected like `prompt_estimate`) and the free rest."""
        memory = estimate_text_tokens(self.system_prompt.memory_text) if self.system_prompt.memory_text else 0
        summary, messages = self._message_estimates
        raw = {
            "system_prompt": max(0, estimate_text_tokens(self.system_prompt.text) - memory),
            "memory_files": memory,
            "tools": self._tools_estimate,
            "summary": summary,
            "messages": messages,
        }
        parts = {name: corrected_estimate(tokens, self.ratio) for name, tokens in raw.items()}
        return ContextBreakdown(context_window=context_window, **parts)


@dataclass(frozen=True)
class ContextBreakdown:
    """Where a session's window goes: the estimated tokens of each part of the next request."""

    context_window: int
    system_prompt: int
    memory_files: int
    tools: int
    summary: int
    messages: int

    PARTS: ClassVar[tuple[str, ...]] = ("system_prompt", "memory_files", "tools", "summary", "messages")

    @property
    def used(self) -> int:
        return sum(getattr(self, name) for name in self.PARTS)

    @property
    def free(self) -> int:
        return max(0, self.context_window - self.used)

    def as_dict(self) -> dict[str, int]:
        return {**{name: getattr(self, name) for name in self.PARTS}, "free": self.free}


def build_model_context(
    session: Session, *, tools: list[ToolSpec] | None = None, now: datetime | None = None
) -> ModelContext:
    """Build the context of the session's next model call; nothing stored changes."""
    now = now or dj_timezone.now()
    assistant = session.assistant
    tools = list(tools or [])
    estimates = active_memo() or EstimateMemo()
    with estimates.active():
        cached_view = session_view(session)
        entries, view_memo, view = list(cached_view.entries), cached_view.memo, list(cached_view.context)
        pruning = prune_view(
            view,
            assistant=assistant,
            context_window=session.context_window,
            last_touch=session.last_cache_touch_at,
            now=now,
        )
    system_prompt = build_system_prompt(assistant, now=now, tool_names=tuple(t["name"] for t in tools))
    model = effective_model(assistant)
    return ModelContext(
        estimates=estimates,
        system_prompt=system_prompt,
        view=view,
        pruning=pruning,
        tools=tools,
        model=model,
        ratio=calibration_ratio(model),
        now=now,
        entries=entries,
        compaction_index=cached_view.compaction_index,
        view_memo=view_memo,
    )
