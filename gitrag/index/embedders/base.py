"""The embedder protocol and the helpers every embedder shares (the registry is
:mod:`gitrag.index.embedders.registry`, above the adapters).

An embedder turns texts into L2-normalised float32 vectors. Its ``fingerprint`` names
everything that changes the vectors (kind, model, dimension, prefixes, normalisation):
vectors with different fingerprints never meet in one collection or cache entry.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from gitrag.index.chunking.model import TokenSpan


@runtime_checkable
class Embedder(Protocol):
    """What the indexer and retrieval need from an embedding model.

    ``dim``: vector length. ``max_tokens``: the longest input in the model's own tokens
    that is embedded without truncation; the chunker keeps every chunk within it.

    Optional capabilities, each a named protocol below that callers test with
    ``isinstance`` (and fall back without): :class:`PartialEmbedder` (ollama, local),
    :class:`SpanEmbedder` (static), :class:`SelfChecking` (static, local).
    """

    name: str
    dim: int
    max_tokens: int

    @property
    def fingerprint(self) -> str: ...

    def count_tokens(self, text: str) -> int:
        """Length of ``text`` in the model's tokens (special tokens and prefix included)."""

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        """Returns float32 array (len(texts), dim), rows L2-normalised.

        Raises EmbedderUnavailable when the model cannot be reached or loaded, and
        EmbedderError when it answers with unusable vectors."""

    def embed_query(self, text: str) -> np.ndarray:
        """Returns float32 array (dim,), L2-normalised, with the model's query prefix."""


@runtime_checkable
class PartialEmbedder(Protocol):
    """An embedder that reports the inputs it could not embed instead of failing them all."""

    def embed_documents_partial(self, texts: list[str]) -> tuple[np.ndarray, list[int]]:
        """``(vectors, failed)`` as :func:`embed_partial` returns them."""


@runtime_checkable
class SpanEmbedder(Protocol):
    """An embedder whose chunks can be counted and embedded from one tokenisation of a file:
    the chunker cuts a file's chunks from ``tokenize`` of it, and the indexer embeds them from
    those token ids (bit for bit the texts' vectors)."""

    @property
    def fingerprint(self) -> str: ...

    def tokenize(self, text: str) -> Tokens | None:
        """One tokenisation of ``text`` (see :class:`Tokens`); None: not offered for this model."""

    def embed_spans(self, spans: Sequence[TokenSpan]) -> np.ndarray:
        """float32 (len(spans), dim), unit rows: the vectors of the texts the spans stand for."""


@runtime_checkable
class SelfChecking(Protocol):
    """An embedder ``gitrag doctor`` checks from its files, without loading a model."""

    def self_check(self) -> str:
        """A one-line description of what was checked; raises EmbedderUnavailable when broken."""


def make_fingerprint(**parts: object) -> str:
    """A stable short id of the parts that define an embedder's vector space."""
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"))
    return f"{parts.get('kind', 'x')}-{hashlib.sha256(blob.encode()).hexdigest()[:16]}"


def l2_normalise(vectors: np.ndarray) -> np.ndarray:
    """Returns float32 copy of ``vectors`` (n, dim) with each row scaled to unit length."""
    arr = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(arr, axis=-1, keepdims=True)
    norms[norms == 0] = 1.0
    return arr / norms


@dataclass(frozen=True, eq=False)
class Tokens:
    """One tokenisation of a text by an embedder's own tokenizer (its optional ``tokenize``).

    ``ids``: int32 (n,) token ids, no special tokens; ``starts``: int64 (n,) the character
    offset in the text where each token starts, ascending; ``model``: the fingerprint of
    the embedder whose vocabulary ``ids`` index (a :class:`~gitrag.index.chunking.model.TokenSpan`
    carries it, so ids never meet another model's vectors)."""

    ids: np.ndarray
    starts: np.ndarray
    model: str


def embed_partial(
    embedder: Embedder, texts: list[str], spans: Sequence[TokenSpan | None] | None = None
) -> tuple[np.ndarray, list[int]]:
    """Embed what can be embedded: ``(vectors, failed)``.

    ``vectors``: float32 (len(texts), dim) in input order, unit rows, except that the
    row of each failed input is all zeros (never store it); ``failed``: sorted indices
    into ``texts`` that could not be embedded (already logged). Uses
    ``embed_documents_partial`` when the embedder has one (ollama, local), else
    ``embed_documents`` (nothing fails alone). Raises EmbedderUnavailable /
    EmbedderError when the embedder fails as a whole.

    ``spans`` (optional, one per text, None where unknown): the chunker's exact token ids
    of the text (:class:`~gitrag.index.chunking.model.TokenSpan`, from the embedder's own
    ``tokenize`` of the file). An embedder with the optional capability ``embed_spans``
    (static) embeds those from the ids, without tokenising the text again; the result is
    the text's vector, bit for bit. Spans of another model, or an embedder without the
    capability, fall back to embedding the texts."""
    fingerprint = embedder.fingerprint if isinstance(embedder, SpanEmbedder) and spans else None
    chosen = [(i, sp) for i, sp in enumerate(spans or ()) if sp is not None and sp.model == fingerprint]
    use = [i for i, _ in chosen]
    if not use or not isinstance(embedder, SpanEmbedder):
        if isinstance(embedder, PartialEmbedder):
            return embedder.embed_documents_partial(texts)
        return embedder.embed_documents(texts), []
    out = np.zeros((len(texts), embedder.dim), dtype=np.float32)
    out[use] = embedder.embed_spans([sp for _, sp in chosen])
    if len(use) < len(texts):
        taken = set(use)
        rest = [i for i in range(len(texts)) if i not in taken]
        vectors, failed = embed_partial(embedder, [texts[i] for i in rest])
        out[rest] = vectors
        return out, sorted(rest[j] for j in failed)
    return out, []
