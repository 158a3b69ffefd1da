"""Vector scores on one scale whatever the embedder (pure: no Django, no database).

Embedders spread cosine similarity differently: multilingual-e5-small rates unrelated texts
about 0.70-0.75 and a matching answer 0.80-0.90, all-MiniLM-L6-v2 about 0.0-0.15 and 0.35-0.7.
Fusion weights, `minScore` and the low-confidence fallback are meant in one sense, so each
cosine is first mapped linearly from the embedder's "unrelated" level (0) to its "same meaning"
level (1), clamped to 0..1. The levels were read off the development sets (README, "Scores
across embedders"); an embedder without levels keeps its raw cosine.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class VectorScale:
    """Where an embedder's cosines of unrelated and of same-meaning texts sit."""

    unrelated: float
    same_meaning: float

    def normalise(self, cosine: float) -> float:
        """Return the cosine on the common 0..1 scale."""
        span = self.same_meaning - self.unrelated
        return min(1.0, max(0.0, (cosine - self.unrelated) / span))


RAW_COSINE = VectorScale(unrelated=0.0, same_meaning=1.0)
SCALES = {
    "intfloat/multilingual-e5-small": VectorScale(unrelated=0.72, same_meaning=0.90),
    "sentence-transformers/all-MiniLM-L6-v2": RAW_COSINE,
}


def scale_for(model: str) -> VectorScale:
    """Return the embedder model's scale (raw cosine for a model not measured)."""
    return SCALES.get(model, RAW_COSINE)
