"""Vector scores on one scale whatever the embedder (pure: no Django, no database).

Embedders spread cosine similarity differently: multilingual-e5-small rates unrelated texts
about 0.72-0.78 (an insurance answer to another insurance question 0.85, the right answer 0.91
on InsuranceQA-zh valid), all-MiniLM-L6-v2 unrelated turns about 0.0-0.15. Fusion weights,
`minScore` and the low-confidence fallback are meant in one sense, so each cosine is first
mapped linearly from the embedder's "unrelated" level (0) to identical text (1), clamped at 0.
The map keeps the vector side's order and stretches e5's narrow band to the width MiniLM's
cosines have, so the fusion weights balance the two sides alike. The levels were read off the
development sets (README, Evaluation); an embedder without one keeps its raw cosine.
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
    "intfloat/multilingual-e5-small": VectorScale(unrelated=0.72, same_meaning=1.0),
    "sentence-transformers/all-MiniLM-L6-v2": RAW_COSINE,
}


def scale_for(model: str) -> VectorScale:
    """Return the embedder model's scale (raw cosine for a model not measured)."""
    return SCALES.get(model, RAW_COSINE)
