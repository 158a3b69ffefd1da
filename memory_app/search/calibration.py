"""What search needs to know of each embedder, measured on the development sets (pure: no Django).

An `EmbedderProfile` per model:

* **The vector scale.** Embedders spread cosine similarity differently: multilingual-e5-small
  rates unrelated texts about 0.72-0.78 (an insurance answer to another insurance question 0.85,
  the right answer 0.91 on InsuranceQA-zh valid), all-MiniLM-L6-v2 unrelated turns about
  0.0-0.15. Fusion weights, `minScore` and the low-confidence fallback are meant in one sense, so
  each cosine is first mapped linearly from the embedder's "unrelated" level (0) to identical
  text (1), clamped at 0. The map keeps the vector side's order and stretches e5's narrow band to
  the width MiniLM's cosines have, so the fusion weights balance the two sides alike.
* **Word pieces per estimated token**, which sets how long a chunk the embedder reads whole
  (`chunking.effective_chunk_tokens`): MiniLM's WordPiece splits prose about 1:1 and hashes
  nearly 3:1 (2.0 covers prose, code and paths); e5's SentencePiece reads Chinese at 0.68 pieces
  per estimated token and English at 0.91 (medians, 1.0 and 1.22 at most, over 400 InsuranceQA
  answers), so 1.25 lets OpenClaw's 400-token chunks through its 512-piece window.

A model without a profile keeps its raw cosine and the conservative 2.0. The figures behind each
value are in README (Evaluation and benchmark) and docs/evaluation.md.
"""

from __future__ import annotations

from dataclasses import dataclass

# Word pieces per estimated token (`tokens.estimate_text_tokens`) for an embedder not measured.
DEFAULT_PIECES_PER_TOKEN = 2.0


@dataclass(frozen=True)
class VectorScale:
    """Where an embedder's cosines of unrelated and of same-meaning texts sit."""

    unrelated: float
    same_meaning: float

    def normalise(self, cosine: float) -> float:
        """Return the cosine on the common 0..1 scale."""
        span = self.same_meaning - self.unrelated
        return min(1.0, max(0.0, (cosine - self.unrelated) / span))

    def raw(self, score: float) -> float:
        """Return the cosine that `normalise` maps to ``score`` (a threshold on the raw cosines)."""
        return self.unrelated + score * (self.same_meaning - self.unrelated)


RAW_COSINE = VectorScale(unrelated=0.0, same_meaning=1.0)


@dataclass(frozen=True)
class EmbedderProfile:
    """One embedder's vector scale and how many word pieces its tokenizer makes of a token."""

    scale: VectorScale = RAW_COSINE
    pieces_per_token: float = DEFAULT_PIECES_PER_TOKEN


UNMEASURED = EmbedderProfile()
PROFILES = {
    "intfloat/multilingual-e5-small": EmbedderProfile(
        scale=VectorScale(unrelated=0.72, same_meaning=1.0), pieces_per_token=1.25
    ),
    "sentence-transformers/all-MiniLM-L6-v2": EmbedderProfile(scale=RAW_COSINE, pieces_per_token=2.0),
}


def profile_for(model: str | None) -> EmbedderProfile:
    """Return the embedder model's profile (`UNMEASURED` for a model not measured, or None)."""
    return PROFILES.get(model or "", UNMEASURED)


def scale_for(model: str) -> VectorScale:
    """Return the embedder model's vector scale (raw cosine for a model not measured)."""
    return profile_for(model).scale
