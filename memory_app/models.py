"""Long-term memory: Markdown documents per assistant and every revision of them."""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from pgvector.django import VectorField

from openclaw_site.models import Assistant


def content_hash(content: str) -> str:
    """Return the SHA-256 of a document's text (OpenClaw's file-record hash, docs/openclaw-behaviour.md §4.2)."""
    return hashlib.sha256(content.encode()).hexdigest()


class MemoryDocument(models.Model):
    assistant = models.ForeignKey(Assistant, on_delete=models.CASCADE, related_name="memory_documents")
    path = models.CharField(max_length=255)
    content = models.TextField(blank=True)
    content_hash = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["assistant", "path"]
        constraints = [
            models.UniqueConstraint(fields=["assistant", "path"], name="memory_document_path_unique")
        ]

    def __str__(self) -> str:
        return f"{self.assistant}:{self.path}"

    @property
    def line_count(self) -> int:
        return len(self.content.splitlines())


class Author(models.TextChoices):
    USER = "user"
    ADMIN = "admin"
    AGENT = "agent"
    FLUSH = "flush"
    IMPORT = "import"


class RevisionAction(models.TextChoices):
    CREATE = "create"
    UPDATE = "update"
    APPEND = "append"
    DELETE = "delete"
    REVERT = "revert"
    RENAME = "rename"


class OriginKind(models.TextChoices):
    """Where a revision's new lines came from (docs/design.md, Provenance, consolidation and forgetting)."""

    PERSON = "person"  # a signed-in person: dashboard, admin, REST with a browser session
    API_KEY = "api_key"  # REST with an API key
    AGENT = "agent"  # an agent's tool: MCP, the OpenClaw plugin
    FLUSH = "flush"  # the memory flush of a session
    IMPORT = "import"  # a workspace import
    PROPOSAL = "proposal"  # an approved consolidation proposal


class Trust(models.TextChoices):
    OWNER = "owner"  # a person of the team wrote or approved it
    AGENT = "agent"  # the model or a program, from the conversation
    UNTRUSTED = "untrusted"  # derived from outside content (a fetched page or file, an import)


class MemoryImport(models.Model):
    """One import of outside text into an assistant's memory; what `forget` names with ``import``."""

    assistant = models.ForeignKey(Assistant, on_delete=models.CASCADE, related_name="memory_imports")
    label = models.CharField(max_length=255, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"import {self.pk} of {self.assistant}: {self.label}"


class MemoryRevision(models.Model):
    """Who wrote what, and from which message. Kept when the document is deleted (no data is lost).

    ``session_pk``/``message_pk`` point at sessions_app rows without a foreign key: memory_app is the
    lower layer and knows nothing about sessions (docs/architecture.md). ``api_key_pk`` and
    ``import_pk`` have none either, so a revision outlives the key or import it names.
    ``line_origins`` is the revision each line of ``content`` first appeared in, run-length
    encoded (`memory_app.governance.lines`).
    """

    assistant = models.ForeignKey(Assistant, on_delete=models.CASCADE, related_name="memory_revisions")
    document = models.ForeignKey(
        MemoryDocument, null=True, blank=True, on_delete=models.SET_NULL, related_name="revisions"
    )
    path = models.CharField(max_length=255)
    content = models.TextField(blank=True)
    content_hash = models.CharField(max_length=64)
    action = models.CharField(max_length=16, choices=RevisionAction)
    author = models.CharField(max_length=16, choices=Author)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    session_pk = models.BigIntegerField(null=True, blank=True)
    message_pk = models.BigIntegerField(null=True, blank=True)
    note = models.CharField(max_length=255, blank=True)
    origin_kind = models.CharField(max_length=16, choices=OriginKind, default=OriginKind.PERSON)
    trust = models.CharField(max_length=16, choices=Trust, default=Trust.OWNER)
    api_key_pk = models.BigIntegerField(null=True, blank=True)
    api_key_name = models.CharField(max_length=100, blank=True)
    import_pk = models.BigIntegerField(null=True, blank=True)
    # An approved consolidation proposal; the reviewer is ``user``.
    proposal = models.ForeignKey(
        "Proposal", null=True, blank=True, on_delete=models.SET_NULL, related_name="revisions"
    )
    line_origins = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            # Forget finds a source's revisions without a scan (memory_app.governance.forget).
            models.Index(fields=["assistant", "session_pk"], name="revision_session"),
            models.Index(fields=["assistant", "api_key_pk"], name="revision_api_key"),
            models.Index(fields=["assistant", "import_pk"], name="revision_import"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(author__in=Author.values), name="revision_author_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(origin_kind__in=OriginKind.values), name="revision_origin_kind_valid"
            ),
            models.CheckConstraint(condition=models.Q(trust__in=Trust.values), name="revision_trust_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.path} {self.action} by {self.author} at {self.created_at:%Y-%m-%d %H:%M}"


class ForgottenSource(models.Model):
    """A session, API key or import whose lines were forgotten (memory_app.governance.forget).

    ``key`` is the source's id (no foreign key: the source may be gone). ``line_hashes`` are the
    normal-form hashes of the lines removed, which later writes other than a person's leave out.
    """

    class Kind(models.TextChoices):
        SESSION = "session"
        API_KEY = "api_key"
        IMPORT = "import"

    assistant = models.ForeignKey(Assistant, on_delete=models.CASCADE, related_name="forgotten_sources")
    kind = models.CharField(max_length=16, choices=Kind)
    key = models.BigIntegerField()
    line_hashes = models.JSONField(default=list, blank=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["assistant", "kind", "key"], name="forgotten_source_unique"),
            models.CheckConstraint(
                condition=models.Q(kind__in=["session", "api_key", "import"]), name="forgotten_kind_valid"
            ),
        ]
        indexes = [models.Index(fields=["kind", "key"], name="forgotten_kind_key")]

    def __str__(self) -> str:
        return f"forgotten {self.kind} {self.key} of {self.assistant}"


class Proposal(models.Model):
    """A consolidation proposal a person reviews (memory_app.governance.consolidation).

    ``documents`` are the line ranges it touches ``[{path, start_line, end_line}]``; ``sources``
    cite each line it rests on ``[{path, line, text, revision, trust}]``; ``fingerprint`` names
    what it proposes (its kind and the normal forms of its sources), so a rejected proposal is
    not proposed again and an open one not twice.
    """

    class Kind(models.TextChoices):
        MERGE = "merge"  # duplicates and near-duplicates: keep one line
        SUPERSEDE = "supersede"  # a contradicted fact: the newer one wins, in the first source's place
        PROMOTE = "promote"  # a durable fact from daily notes into MEMORY.md
        RETIRE = "retire"  # lines a person marked stale: removed

    class State(models.TextChoices):
        OPEN = "open"
        APPROVED = "approved"
        REJECTED = "rejected"

    assistant = models.ForeignKey(Assistant, on_delete=models.CASCADE, related_name="memory_proposals")
    kind = models.CharField(max_length=16, choices=Kind)
    state = models.CharField(max_length=16, choices=State, default=State.OPEN)
    documents = models.JSONField(default=list)
    new_text = models.TextField(blank=True)
    sources = models.JSONField(default=list)
    confidence = models.FloatField()
    diff = models.TextField(blank=True)
    # promote: the document the new text is appended to (MEMORY.md).
    target_path = models.CharField(max_length=255, blank=True)
    fingerprint = models.CharField(max_length=64)
    reason = models.CharField(max_length=255, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_note = models.CharField(max_length=255, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-confidence", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["assistant", "fingerprint"], name="proposal_fingerprint_unique"),
            models.CheckConstraint(
                condition=models.Q(state__in=["open", "approved", "rejected"]), name="proposal_state_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(confidence__gte=0) & models.Q(confidence__lte=1),
                name="proposal_confidence_range",
            ),
        ]
        indexes = [models.Index(fields=["assistant", "state"], name="proposal_assistant_state")]

    def __str__(self) -> str:
        return f"{self.kind} proposal {self.pk} ({self.state})"


# --- The search index (docs/design.md, Data model; docs/openclaw-behaviour.md §4.4) ------------------------


class Source(models.TextChoices):
    MEMORY = "memory"
    SESSIONS = "sessions"


# Chunks stored without a vector (no embedder, or it failed) carry this model name, like
# OpenClaw's FTS-only mode (docs/openclaw-behaviour.md §4.4 "Model is `fts-only` with no provider").
FTS_ONLY_MODEL = "fts-only"


class MemoryChunk(models.Model):
    """One indexed piece of a memory document or a session transcript.

    ``generation`` lets a full reindex build a complete new set of rows while the rows of the
    active generation keep answering searches; `IndexState` says which generation is live.
    ``embedding`` has no fixed size so several models can live side by side: each dimension gets
    its own partial HNSW index on ``embedding::vector(<dims>)`` (migration 0003 and
    `memory_app.vector_indexes`), and the search query uses the same cast and predicate.
    """

    assistant = models.ForeignKey(Assistant, on_delete=models.CASCADE, related_name="memory_chunks")
    source = models.CharField(max_length=16, choices=Source)
    generation = models.PositiveIntegerField(default=1)
    document = models.ForeignKey(
        MemoryDocument, null=True, blank=True, on_delete=models.CASCADE, related_name="chunks"
    )
    # sessions_app.Session pk, without a foreign key: memory_app knows nothing about sessions.
    session_pk = models.BigIntegerField(null=True, blank=True)
    path = models.CharField(max_length=255)
    start_line = models.PositiveIntegerField()
    end_line = models.PositiveIntegerField()
    # The line number (memory) or message seq (sessions) of every line of ``text``, so a snippet
    # cut from the middle of a chunk still cites exact lines.
    line_numbers = ArrayField(models.PositiveIntegerField(), default=list)
    text = models.TextField()
    hash = models.CharField(max_length=64)
    # Hash of the whole document/transcript the chunk came from: an unchanged source is skipped.
    source_hash = models.CharField(max_length=64)
    model = models.CharField(max_length=200)
    dims = models.PositiveIntegerField(default=0)
    embedding = VectorField(null=True, blank=True)
    tsv = SearchVectorField(null=True)
    # Sessions: the newest message time in the chunk (docs/design.md §D10). Memory: the document's
    # last update; decay dates memory by its path, never by this (docs/openclaw-behaviour.md §4.8).
    timestamp = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["assistant", "source", "path", "start_line"]
        indexes = [
            models.Index(fields=["assistant", "source", "path"], name="memchunk_asst_source_path"),
            models.Index(fields=["assistant", "generation", "source"], name="memchunk_asst_gen_source"),
            # A transcript's rows by line: its last chunk, and the rows an extend replaces, are
            # found without reading the rest (docs/design.md, "A transcript indexed in slices").
            models.Index(fields=["session_pk", "generation", "start_line"], name="memchunk_session_lines"),
            # The rows still waiting for a vector, found by the periodic refresh without a scan.
            models.Index(
                fields=["assistant", "generation", "source"],
                condition=models.Q(model=FTS_ONLY_MODEL),
                name="memchunk_text_only",
            ),
            # ...and one transcript's, oldest first, read by its own index run.
            models.Index(
                fields=["session_pk", "generation", "start_line"],
                condition=models.Q(model=FTS_ONLY_MODEL),
                name="memchunk_session_text_only",
            ),
            GinIndex(fields=["tsv"], name="memchunk_tsv_gin"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(source__in=Source.values), name="memchunk_source_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.path}#L{self.start_line}-L{self.end_line}"


class EmbeddingCache(models.Model):
    """Vectors by (provider key, model, text hash): unchanged text is never embedded twice."""

    provider_key = models.CharField(max_length=64)
    model = models.CharField(max_length=200)
    hash = models.CharField(max_length=64)
    dims = models.PositiveIntegerField()
    embedding = VectorField()
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["provider_key", "model", "hash"], name="embedding_cache_key_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.model}:{self.hash[:12]}"


class IndexState(models.Model):
    """Which generation of an assistant's chunks answers searches, and the one being built.

    ``fingerprint`` is what the active rows were built with (provider, provider key, model,
    dims, chunk tokens/overlap per source); a different current fingerprint means a full reindex
    (docs/design.md §D8). ``progress`` is shown by the reindex task and the dashboard.
    """

    assistant = models.OneToOneField(Assistant, on_delete=models.CASCADE, related_name="index_state")
    fingerprint = models.JSONField(null=True, blank=True)
    active_generation = models.PositiveIntegerField(default=1)
    building_generation = models.PositiveIntegerField(null=True, blank=True)
    building_fingerprint = models.JSONField(null=True, blank=True)
    progress = models.JSONField(default=dict, blank=True)
    last_error = models.TextField(blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"index of {self.assistant} (generation {self.active_generation})"


class IndexedSource(models.Model):
    """Per document path or session: the pending index request and how far a transcript was indexed.

    A change sets ``due_at`` (no later than ``due_by``), the index job takes the request once it
    is due and clears both (memory_app.index.debounce: a debounce that works across worker processes).
    """

    assistant = models.ForeignKey(Assistant, on_delete=models.CASCADE, related_name="indexed_sources")
    source = models.CharField(max_length=16, choices=Source)
    key = models.CharField(max_length=255)
    # The pending request, None when there is none: when it falls due, and the latest it may.
    due_at = models.DateTimeField(null=True, blank=True)
    due_by = models.DateTimeField(null=True, blank=True)
    indexed_version = models.PositiveIntegerField(default=0)
    # Sessions: the last message seq included in the index (the delta thresholds count after it).
    indexed_upto = models.PositiveIntegerField(default=0)
    indexed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["assistant", "source", "key"], name="indexed_source_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.assistant}:{self.source}:{self.key}"
