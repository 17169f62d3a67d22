"""The local embedding model of semantic search (the optional `semantic` extra).

The model ships inside its wheel (`tokenlearn-static-model`: a static Model2Vec-style model,
10k vocabulary, 64 dimensions, int8, about 20 MiB installed, no PyTorch); nothing is ever
downloaded. `check` runs at start, without loading anything: the package's bundled files must be
there and readable, or the server stops with one line. The model itself loads on the first
embedding (lazily: the cold start to `server/discover` does not pay for it).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

PACKAGE = "tokenlearn-static-model"
MODULE = "static_model"
_FILES = ("config.json", "model.safetensors", "tokenizer.json")
DIMENSIONS = 64


class ModelUnavailable(Exception):
    """The semantic extra is missing or its bundled model is damaged (message: one line)."""


def _spec() -> importlib.machinery.ModuleSpec | None:
    try:
        return importlib.util.find_spec(MODULE)
    except (ImportError, ValueError):  # a finder that refuses it: not installed
        return None


def installed() -> bool:
    return _spec() is not None


def model_name() -> str:
    """The model's name and version, stored beside every vector (a change re-embeds). Read
    from the wheel's dist-info folder name: `importlib.metadata` would import `email` and
    `socket` into every serving process."""
    spec = _spec()
    version = "unknown"
    if spec is not None and spec.submodule_search_locations:
        site = Path(next(iter(spec.submodule_search_locations))).parent
        prefix = PACKAGE.replace("-", "_") + "-"
        for entry in sorted(site.glob(prefix + "*.dist-info")):
            version = entry.name[len(prefix) : -len(".dist-info")]
    return f"{PACKAGE}=={version}"


def check() -> str:
    """The model's name if its bundled files are present and sane; ModelUnavailable if not."""
    spec = _spec()
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailable(
            f"semantic search needs the 'semantic' extra ({PACKAGE}): "
            "pip install 'notes-server[semantic]', or set NOTES_SERVER_SEMANTIC=off"
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    for name in _FILES:
        path = folder / name
        if not path.is_file() or path.stat().st_size == 0:
            raise ModelUnavailable(
                f"the embedding model of {PACKAGE} is incomplete ({name} missing or empty): "
                "reinstall it; it is never downloaded at run time"
            )
    try:
        json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise ModelUnavailable(
            f"the embedding model of {PACKAGE} is damaged (config.json): reinstall it"
        ) from None
    return model_name()


class Embedder:
    """Texts to unit float32 vectors; loads the model on first use, once per process."""

    def __init__(self) -> None:
        self.model = model_name()
        self._encode: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        if self._encode is None:
            with self._lock:
                if self._encode is None:
                    check()
                    from static_model import get_embeddings  # type: ignore[import-untyped]

                    get_embeddings(["warm"])  # the first call loads the files
                    self._encode = get_embeddings
        return self._encode

    def embed(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        # The encoder takes any string; NUL and lone surrogates are dropped first.
        clean = [t.replace("\x00", " ").encode("utf-8", "replace").decode() for t in texts]
        vectors = np.asarray(self._load()(clean), dtype=np.float32).reshape(len(texts), -1)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        unit: np.ndarray = vectors / norms
        return unit
