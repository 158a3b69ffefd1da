"""Dashboard forms: assistants, their OpenClaw-named settings, and API keys.

The settings form is generated from `assistant_settings.SCHEMA`, so every key OpenClaw names has a
field, and it is validated by the same `validate_settings` the REST API uses; each error is shown
next to the field its path names.
"""

from __future__ import annotations

import zoneinfo
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypedDict, cast

from django import forms
from django.forms import BoundField
from django.utils import timezone
from django.utils.text import slugify

from openclaw_site.models import Assistant, Scope
from openclaw_site.teams.assistant_settings import (
    SCHEMA,
    Field,
    SchemaNode,
    SettingsError,
    default_settings,
    smallest_window,
    validate_settings,
)
from openclaw_site.teams.settings_document import SettingsDocument
from providers.json_types import JSONObject

# What each setting does, in a sentence (docs/openclaw-behaviour.md §1.3, §2.1, §3.1, §4.1).
HELP: dict[str, str] = {
    "compaction.mode": "safeguard: OpenClaw's structured summary with the five headings; default: Pi's plain summary.",
    "compaction.reserveTokens": "Tokens kept free for the reply. Compaction runs when the context exceeds window − max(reserveTokens, reserveTokensFloor).",
    "compaction.reserveTokensFloor": "Lower bound of the effective reserve (0 disables the floor).",
    "compaction.keepRecentTokens": "Recent messages worth this many tokens are kept verbatim after the summary.",
    "compaction.maxHistoryShare": "Largest share of the window the history may take before old chunks are dropped from the summary input.",
    "compaction.recentTurnsPreserve": "Last user/assistant turns quoted verbatim in the summary (0–12).",
    "compaction.identifierPolicy": "strict keeps ids, hashes and paths exactly; custom uses the instructions below; off does nothing.",
    "compaction.identifierInstructions": "Used when identifierPolicy is custom.",
    "compaction.customInstructions": "Extra instructions for every summary (at most 800 characters are used).",
    "compaction.qualityGuard.enabled": "Audit each summary and retry when headings or identifiers are missing.",
    "compaction.qualityGuard.maxRetries": "Retries of the audit (0–3).",
    "compaction.model": "Model for summaries only; empty uses LLM_COMPACTION_MODEL or the assistant's model.",
    "compaction.timeoutSeconds": "A summary that takes longer fails and writes nothing.",
    "compaction.memoryFlush.enabled": "Before compacting, let the model append durable notes to memory/YYYY-MM-DD.md in a silent turn.",
    "compaction.memoryFlush.softThresholdTokens": "The flush runs this many tokens before the compaction threshold.",
    "compaction.memoryFlush.forceFlushTranscriptBytes": "Also flush when the transcript passes this size (bytes, or like '2mb'; 0 disables).",
    "compaction.memoryFlush.prompt": "User prompt of the flush turn; empty uses OpenClaw's default.",
    "compaction.memoryFlush.systemPrompt": "System prompt of the flush turn; empty uses OpenClaw's default.",
    "contextPruning.mode": "cache-ttl prunes once per TTL window; always before every call; off never.",
    "contextPruning.ttl": "Cache TTL, like 5m or 1h.",
    "contextPruning.keepLastAssistants": "Tool results after the last N assistant messages are never pruned.",
    "contextPruning.softTrimRatio": "Trim long tool results once the context fills this share of the window.",
    "contextPruning.hardClearRatio": "Clear old tool results entirely above this share of the window.",
    "contextPruning.minPrunableToolChars": "Hard clear only when prunable tool output reaches this many characters.",
    "contextPruning.softTrim.maxChars": "Tool results longer than this are trimmed.",
    "contextPruning.softTrim.headChars": "Characters kept from the start of a trimmed result.",
    "contextPruning.softTrim.tailChars": "Characters kept from the end of a trimmed result.",
    "contextPruning.hardClear.enabled": "Allow replacing old tool results with the placeholder.",
    "contextPruning.hardClear.placeholder": "Text that replaces a cleared tool result.",
    "contextPruning.tools.allow": "Only these tools are pruned (comma-separated globs; empty means all).",
    "contextPruning.tools.deny": "These tools are never pruned (comma-separated globs; deny wins).",
    "memorySearch.enabled": "Give the assistant the memory_search and memory_get tools.",
    "memorySearch.sources": "What search looks in: memory documents, past session transcripts.",
    "memorySearch.chunking.tokens": "Chunk size for the index (clamped to the embedder's input limit).",
    "memorySearch.chunking.overlap": "Tokens shared by neighbouring chunks (less than the chunk size).",
    "memorySearch.sync.watchDebounceMs": "Wait after a memory save before reindexing.",
    "memorySearch.sync.sessions.deltaBytes": "Reindex a transcript after this many new bytes.",
    "memorySearch.sync.sessions.deltaMessages": "Reindex a transcript after this many new messages.",
    "memorySearch.sync.sessions.postCompactionForce": "Reindex a transcript after every compaction.",
    "memorySearch.query.maxResults": "Results returned by a search.",
    "memorySearch.query.minScore": "Results scoring below this are dropped (keyword-only hits are kept).",
    "memorySearch.query.hybrid.enabled": "Combine vector and keyword search.",
    "memorySearch.query.hybrid.vectorWeight": "Weight of the vector score (normalised with textWeight to sum 1).",
    "memorySearch.query.hybrid.textWeight": "Weight of the keyword score.",
    "memorySearch.query.hybrid.candidateMultiplier": "Candidates fetched per result from each side (1–20).",
    "memorySearch.query.hybrid.cjkTextWeightScale": (
        "The text weight of a Chinese, Japanese or Korean query is multiplied by this (1: same weights for every script)."
    ),
    "memorySearch.query.hybrid.mmr.enabled": "Re-rank for diversity (maximal marginal relevance).",
    "memorySearch.query.hybrid.mmr.lambda": "1 = relevance only, 0 = diversity only.",
    "memorySearch.query.hybrid.temporalDecay.enabled": "Prefer recent daily notes and transcripts.",
    "memorySearch.query.hybrid.temporalDecay.halfLifeDays": "A result this many days old counts half.",
    "memorySearch.cache.enabled": "Cache embeddings by text hash so unchanged text is never embedded twice.",
    "memorySearch.cache.maxEntries": "Cap on cached embeddings (empty: no cap).",
    "memorySearch.citations": "Whether search results carry path#Lx-Ly citations.",
    "memoryConsolidation.schedule": "Whether the consolidation job proposes changes by itself each night.",
    "memoryConsolidation.hour": "The hour of the night it runs, in the assistant's time zone (0-23).",
    "memoryConsolidation.autoApply": "Kinds of proposal applied without a review (merge, supersede, "
    "promote, retire; empty: a person reviews every one). Never one resting on an untrusted line.",
}

# The settings page in words: a human label for each setting (the OpenClaw key is shown small
# beside it), and the settings grouped by what they do rather than by where OpenClaw nests them
# (docs/dashboard.md, Settings).
LABELS: dict[str, str] = {
    "compaction.mode": "Summary style",
    "compaction.reserveTokens": "Room kept for the reply",
    "compaction.reserveTokensFloor": "Smallest room kept for the reply",
    "compaction.keepRecentTokens": "Recent tokens kept word for word",
    "compaction.maxHistoryShare": "Largest share of the window for history",
    "compaction.recentTurnsPreserve": "Recent turns quoted in the summary",
    "compaction.identifierPolicy": "Ids, hashes and paths",
    "compaction.identifierInstructions": "Instructions for ids (custom policy)",
    "compaction.customInstructions": "Extra instructions for every summary",
    "compaction.qualityGuard.enabled": "Check each summary and retry",
    "compaction.qualityGuard.maxRetries": "Retries after a failed check",
    "compaction.model": "Model for summaries",
    "compaction.timeoutSeconds": "Time limit of a summary (seconds)",
    "compaction.memoryFlush.enabled": "Save notes to memory before compacting",
    "compaction.memoryFlush.softThresholdTokens": "Start this many tokens before compaction",
    "compaction.memoryFlush.forceFlushTranscriptBytes": "Also when the transcript reaches",
    "compaction.memoryFlush.prompt": "Prompt of the note-taking turn",
    "compaction.memoryFlush.systemPrompt": "System prompt of the note-taking turn",
    "contextPruning.mode": "When to trim old tool output",
    "contextPruning.ttl": "Trim at most once per",
    "contextPruning.keepLastAssistants": "Never trim after the last N replies",
    "contextPruning.softTrimRatio": "Shorten tool output from this share of the window",
    "contextPruning.hardClearRatio": "Clear tool output from this share of the window",
    "contextPruning.minPrunableToolChars": "Clear only above this many characters",
    "contextPruning.softTrim.maxChars": "Shorten tool output longer than",
    "contextPruning.softTrim.headChars": "Characters kept from the start",
    "contextPruning.softTrim.tailChars": "Characters kept from the end",
    "contextPruning.hardClear.enabled": "Allow clearing old tool output",
    "contextPruning.hardClear.placeholder": "Text left in place of cleared output",
    "contextPruning.tools.allow": "Only trim these tools",
    "contextPruning.tools.deny": "Never trim these tools",
    "memorySearch.enabled": "Let the assistant search its memory",
    "memorySearch.sources": "Search in",
    "memorySearch.chunking.tokens": "Piece size (tokens)",
    "memorySearch.chunking.overlap": "Overlap between pieces (tokens)",
    "memorySearch.chunking.sessions.tokens": "Piece size for sessions (tokens)",
    "memorySearch.chunking.sessions.overlap": "Overlap for sessions (tokens)",
    "memorySearch.sync.watchDebounceMs": "Wait after a save (ms)",
    "memorySearch.sync.sessions.deltaBytes": "Reindex a session after new bytes",
    "memorySearch.sync.sessions.deltaMessages": "Reindex a session after new messages",
    "memorySearch.sync.sessions.postCompactionForce": "Reindex a session after compaction",
    "memorySearch.query.maxResults": "Results per search",
    "memorySearch.query.minScore": "Lowest score shown",
    "memorySearch.query.snippetMaxChars": "Snippet length (characters)",
    "memorySearch.query.snippetMode": "Snippet shows",
    "memorySearch.query.hybrid.enabled": "Combine meaning and keywords",
    "memorySearch.query.hybrid.vectorWeight": "Weight of meaning",
    "memorySearch.query.hybrid.textWeight": "Weight of keywords",
    "memorySearch.query.hybrid.candidateMultiplier": "Candidates per result",
    "memorySearch.query.hybrid.cjkTextWeightScale": "Keyword weight for Chinese, Japanese, Korean",
    "memorySearch.query.hybrid.mmr.enabled": "Prefer varied results",
    "memorySearch.query.hybrid.mmr.lambda": "Relevance against variety",
    "memorySearch.query.hybrid.temporalDecay.enabled": "Prefer recent notes and sessions",
    "memorySearch.query.hybrid.temporalDecay.halfLifeDays": "Half-life (days)",
    "memorySearch.cache.enabled": "Remember embeddings of unchanged text",
    "memorySearch.cache.maxEntries": "Most embeddings remembered",
    "memorySearch.citations": "Cite sources in results",
    "memoryConsolidation.schedule": "Propose tidy-ups nightly",
    "memoryConsolidation.hour": "At this hour",
    "memoryConsolidation.autoApply": "Apply without review",
}


def _labelled_under(*prefixes: str) -> tuple[str, ...]:
    """The labelled settings under these prefixes, in label order (a section's paths)."""
    return tuple(path for path in LABELS if path.startswith(prefixes))


@dataclass(frozen=True)
class Section:
    """One group of the settings page: what its settings do, and which they are."""

    title: str
    about: str
    paths: tuple[str, ...]
    open: bool = True


SECTIONS: tuple[Section, ...] = (
    Section(
        "When the conversation gets long",
        "How much of the window stays free, and what compaction keeps word for word.",
        (
            "compaction.reserveTokens",
            "compaction.reserveTokensFloor",
            "compaction.keepRecentTokens",
            "compaction.maxHistoryShare",
        ),
    ),
    Section(
        "How summaries are written",
        "The summary that replaces older messages when the session is compacted.",
        (
            "compaction.mode",
            "compaction.recentTurnsPreserve",
            "compaction.identifierPolicy",
            "compaction.identifierInstructions",
            "compaction.customInstructions",
            "compaction.qualityGuard.enabled",
            "compaction.qualityGuard.maxRetries",
            "compaction.model",
            "compaction.timeoutSeconds",
        ),
        open=False,
    ),
    Section(
        "Notes saved before compacting",
        "A silent turn in which the assistant writes what to remember into today's daily note.",
        _labelled_under("compaction.memoryFlush."),
        open=False,
    ),
    Section(
        "Memory search",
        "Whether the assistant searches its memory, where, and how many results it gets.",
        (
            "memorySearch.enabled",
            "memorySearch.sources",
            "memorySearch.query.maxResults",
            "memorySearch.query.minScore",
            "memorySearch.query.snippetMaxChars",
            "memorySearch.query.snippetMode",
            "memorySearch.citations",
        ),
        open=False,
    ),
    Section(
        "Trimming old tool output",
        "Long tool results are shortened or cleared before a model call; the transcript keeps them whole.",
        _labelled_under("contextPruning."),
        open=False,
    ),
    Section(
        "Search ranking",
        "How meaning and keyword matches are weighed, varied and aged.",
        _labelled_under("memorySearch.query.hybrid."),
        open=False,
    ),
    Section(
        "Indexing",
        "How memory and sessions are cut into pieces and kept up to date for search.",
        _labelled_under("memorySearch.chunking.", "memorySearch.sync.", "memorySearch.cache."),
        open=False,
    ),
    Section(
        "Keeping memory tidy",
        "The job that proposes merging duplicates and retiring stale facts, for a person to review.",
        ("memoryConsolidation.schedule", "memoryConsolidation.hour", "memoryConsolidation.autoApply"),
        open=False,
    ),
)

_TEXTAREA_KEYS = {"customInstructions", "identifierInstructions", "prompt", "systemPrompt"}


def iter_leaves(schema: SchemaNode = SCHEMA, prefix: str = "") -> Iterator[tuple[str, Field]]:
    """Yield (dotted path, Field) for every leaf of the settings schema, in schema order."""
    for key, node in schema.items():
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(node, dict):
            yield from iter_leaves(node, path)
        else:
            yield path, node


def get_path(document: Mapping[str, object], path: str) -> object:
    """Return the value at a dotted path of a settings document (a path of SCHEMA: sections above it)."""
    value: object = document
    for key in path.split("."):
        value = cast(Mapping[str, object], value)[key]
    return value


def nest(path: str, value: object) -> JSONObject:
    """Return ``{"a": {"b": value}}`` for path ``a.b``."""
    keys = path.split(".")
    result: JSONObject = {keys[-1]: value}
    for key in reversed(keys[:-1]):
        result = {key: result}
    return result


def _merge_into(target: JSONObject, path: str, value: object) -> None:
    keys = path.split(".")
    for key in keys[:-1]:
        target = cast(JSONObject, target.setdefault(key, {}))  # only _merge_into fills it: sections
    target[keys[-1]] = value


class _FieldArguments(TypedDict):
    label: str
    help_text: str
    required: bool


def _form_field(path: str, spec: Field) -> forms.Field:
    """Return the form field for one schema leaf, labelled in words (its key shows beside it)."""
    kinds = spec.kind if isinstance(spec.kind, tuple) else (spec.kind,)
    common: _FieldArguments = {
        "label": LABELS.get(path, path.rsplit(".", 1)[-1]),
        "help_text": HELP.get(path, ""),
        "required": False,
    }
    if bool in kinds:
        return forms.BooleanField(**common)
    if spec.choices:
        return forms.ChoiceField(choices=[(c, c) for c in spec.choices], **common)
    if path == "memorySearch.sources":
        return forms.MultipleChoiceField(
            choices=[("memory", "memory"), ("sessions", "sessions")],
            widget=forms.CheckboxSelectMultiple,
            **common,
        )
    # No min/max here: the ranges live in validate_settings, whose message shows next to the field.
    if kinds == (int,):
        return forms.IntegerField(**common)
    if float in kinds and str not in kinds:
        return forms.FloatField(widget=forms.NumberInput(attrs={"step": "any"}), **common)
    widget = (
        forms.Textarea(attrs={"rows": 3}) if path.rsplit(".", 1)[-1] in _TEXTAREA_KEYS else forms.TextInput
    )
    return forms.CharField(widget=widget, strip=True, **common)


def _to_setting(path: str, spec: Field, raw: Any) -> Any:
    """Convert a cleaned form value to the settings value (None for an empty optional field)."""
    kinds = spec.kind if isinstance(spec.kind, tuple) else (spec.kind,)
    if bool in kinds:
        return bool(raw)
    if spec.item_kind is str and path != "memorySearch.sources":
        return [part.strip() for part in (raw or "").split(",") if part.strip()]
    if raw in ("", None):
        return None  # validate_settings says "must not be null" for a required one
    if str in kinds and int in kinds and isinstance(raw, str) and raw.isdigit():
        return int(raw)  # forceFlushTranscriptBytes 2097152, ttl 300000
    if isinstance(raw, float) and raw.is_integer() and int in kinds:
        return int(raw)
    return raw


def _initial(path: str, value: Any) -> Any:
    if isinstance(value, list) and path != "memorySearch.sources":
        return ", ".join(value)
    return "" if value is None else value


class FormSection(TypedDict):
    """One group of the settings form as the template shows it."""

    title: str
    about: str
    slug: str
    open: bool
    fields: list[tuple[str, BoundField]]


class SettingsForm(forms.Form):
    """Every OpenClaw-named setting of an assistant, validated by `validate_settings`."""

    def __init__(self, *args: Any, current: object, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.current = validate_settings(current)
        self.leaves = dict(iter_leaves())
        for path, spec in self.leaves.items():
            self.fields[path] = _form_field(path, spec)
            self.fields[path].initial = _initial(path, get_path(self.current, path))
        self.document: SettingsDocument | None = None

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        data: JSONObject = {}
        for path, spec in self.leaves.items():
            if path in self.errors:
                continue
            value = _to_setting(path, spec, cleaned.get(path))
            if value is None and not spec.nullable:
                self.add_error(path, "This setting needs a value.")
                continue
            try:  # each leaf alone first, so every bad field gets its own message
                validate_settings(nest(path, value), base=self.current)
            except SettingsError as error:
                self.add_error(path, error.message)
                continue
            _merge_into(data, path, value)
        if not self.errors:
            self._validate_whole(data)
        return cleaned

    def _validate_whole(self, data: JSONObject) -> None:
        try:
            self.document = validate_settings(data, base=self.current)
        except SettingsError as error:
            field = error.path.removeprefix("settings.").split("[", 1)[0]
            self.add_error(field if field in self.fields else None, error.message)

    def sections(self) -> list[FormSection]:
        """Return the bound fields grouped for the template: [{title, about, open, fields: [(path, field)]}].

        A section holding a field with an error is open; a setting no section names comes last.
        """
        named = {path for section in SECTIONS for path in section.paths}
        rest = tuple(path for path in self.leaves if path not in named)
        groups = [*SECTIONS, *([Section("Other settings", "", rest)] if rest else [])]
        return [
            {
                "title": section.title,
                "about": section.about,
                "slug": slugify(section.title),
                "open": section.open or any(path in self.errors for path in section.paths),
                "fields": [(path, self[path]) for path in section.paths],
            }
            for section in groups
        ]


def _valid_timezone(name: str) -> str:
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise forms.ValidationError(
            f"{name!r} is not an IANA time zone (for example Europe/Paris or UTC)."
        ) from None
    return name


class AssistantForm(forms.ModelForm):
    """An assistant's own fields; the slug only when it is created (URLs and exports use it)."""

    class Meta:
        model = Assistant
        fields = ["name", "model", "context_window", "system_prompt", "timezone", "workspace_access"]
        widgets = {"system_prompt": forms.Textarea(attrs={"rows": 4})}
        help_texts = {
            "model": "Overrides LLM_MODEL for this assistant; empty uses the server's model.",
            "context_window": "Tokens the model accepts (at least 16000). Flush and compaction thresholds follow from it.",
            "timezone": "IANA name; daily notes memory/YYYY-MM-DD.md use the date in this zone.",
            "workspace_access": "Read only or none: the memory flush is skipped.",
        }

    def clean_timezone(self) -> str:
        return _valid_timezone(self.cleaned_data["timezone"])


DEFAULTS_MIN_WINDOW = smallest_window(default_settings())


class AssistantCreateForm(AssistantForm):
    class Meta(AssistantForm.Meta):
        fields = ["slug", "name", "model", "context_window", "system_prompt", "timezone", "workspace_access"]
        help_texts = {
            **AssistantForm.Meta.help_texts,
            "slug": "Short name used in URLs, the API and exports: letters, digits, - and _.",
        }

    def __init__(self, *args: Any, team: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.team = team
        # static/js/app.js fills the slug from the name as it is typed, until the slug is edited.
        self.fields["slug"].widget.attrs["data-slug-from"] = f"#{self['name'].auto_id}"
        self.fields["context_window"].help_text = (
            f"Tokens the model accepts. With the default compaction settings at least "
            f"{DEFAULTS_MIN_WINDOW:,}; a smaller one (down to 16,000) needs a smaller reserve and "
            "kept tail under Settings afterwards."
        )

    def clean_context_window(self) -> int:
        window = self.cleaned_data["context_window"]
        if window < DEFAULTS_MIN_WINDOW:
            raise forms.ValidationError(
                f"With the default compaction settings the window must be at least {DEFAULTS_MIN_WINDOW:,} "
                "tokens (the compaction reserve plus the recent tokens kept verbatim). Create it "
                "with a larger window, then lower the reserve under Settings."
            )
        return window

    def clean_slug(self) -> str:
        slug = self.cleaned_data["slug"]
        if Assistant.objects.filter(team=self.team, slug=slug).exists():
            raise forms.ValidationError(f"Your team already has an assistant called {slug!r}.")
        return slug


SCOPE_HELP = {
    Scope.SESSIONS_READ: "read sessions and transcripts",
    Scope.SESSIONS_WRITE: "post messages, compact",
    Scope.MEMORY_READ: "read memory, search",
    Scope.MEMORY_WRITE: "write memory, reindex",
    Scope.ADMIN: "everything, including assistants' settings",
}


class ApiKeyForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="Who or what uses this key, for example 'CI ingest'.")
    scopes = forms.MultipleChoiceField(
        choices=[(s.value, f"{s.value} — {SCOPE_HELP[s]}") for s in Scope],
        widget=forms.CheckboxSelectMultiple,
        initial=[Scope.SESSIONS_READ, Scope.MEMORY_READ],
        error_messages={"required": "Pick at least one scope."},
    )
    expires_in_days = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=3650,
        label="Expires in (days)",
        help_text="Empty: never expires.",
    )

    def expires_at(self) -> Any:
        days = self.cleaned_data.get("expires_in_days")
        return timezone.now() + timedelta(days=days) if days else None


@dataclass(frozen=True)
class CreatedKey:
    """A key just created: the only moment its secret exists outside the client."""

    name: str
    secret: str
