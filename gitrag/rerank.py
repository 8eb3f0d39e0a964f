"""Reranking fused candidates with the symbol graph.

Two steps after the store's hybrid query (dense + sparse fused by RRF, k = 60):

1. **Definition matches.** Identifiers named in the question (``_unpack_args``,
   ``Context.invoke``, `` `wrap_text` ``, ``getHTTPResponse``) are looked up in the symbol
   graph; the chunks holding their definitions form a third ranked list, fused into the
   candidates' RRF scores with the same k (Cormack, Clarke & Buettcher, SIGIR 2009), so a
   definition can enter even when neither the dense nor the sparse list had it.
2. **Graph expansion** (optional, ``expand_hops``): definitions the top results call,
   import or inherit from join with score ``parent score * 0.5 ** hops``.

Every step is measured by ``gitrag eval``; see BENCHMARKS.md for what each one changed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from gitrag.store.base import RRF_K

_BACKTICK = re.compile(r"`([^`\s]{2,80})`")
_TOKEN = re.compile(r"[A-Za-z_$][\w$]*(?:(?:\.|::|#|->)[A-Za-z_$][\w$]*)*(?:\(\))?")
_CAMEL_INNER = re.compile(r"[a-z0-9][A-Z]")


def query_identifiers(question: str) -> list[str]:
    """Code identifiers named in ``question``, in order, without repeats.

    A token counts when it is back-quoted, or looks like code: contains ``_``, a dot or
    ``::`` between names, an inner capital (``getValue``, ``HTTPServer``), or ends ``()``."""
    found = [m.group(1).rstrip("()") for m in _BACKTICK.finditer(question)]
    for m in _TOKEN.finditer(question):
        tok = m.group(0)
        bare = tok[:-2] if tok.endswith("()") else tok
        if tok.endswith("()") or "_" in bare.strip("_") or any(s in bare for s in (".", "::", "#", "->")) \
                or _CAMEL_INNER.search(bare) or (bare.startswith("_") and len(bare) > 2):
            found.append(bare)
    cleaned = [f.strip(".,;:!?'\"") for f in found]
    return [f for f in dict.fromkeys(cleaned) if len(f) >= 3]


@dataclass
class Candidate:
    """A ranked location with the coordinates rerank needs; ``key`` identifies its chunk."""

    key: str
    path: str
    start_line: int
    end_line: int
    symbol: str
    score: float


def fuse_definitions(
    candidates: list[Candidate],
    definition_chunks: list[Candidate],
    weight: float = 1.0,
) -> list[Candidate]:
    """Candidates with ``weight / (RRF_K + rank)`` added for each definition chunk's rank
    (rank from 0, as the store counts); definition chunks not among them are added.
    Returns a new list, best first (ties keep the earlier order)."""
    by_key = {c.key: Candidate(**vars(c)) for c in candidates}
    order = [c.key for c in candidates]
    for rank, d in enumerate(definition_chunks):
        bonus = weight / (RRF_K + rank)
        if d.key in by_key:
            by_key[d.key].score += bonus
        else:
            by_key[d.key] = Candidate(**{**vars(d), "score": bonus})
            order.append(d.key)
    pos = {k: i for i, k in enumerate(order)}
    return sorted(by_key.values(), key=lambda c: (-c.score, pos[c.key]))


def expand(
    ranked: list[Candidate],
    neighbours: Callable[[Candidate], Iterable[tuple[Candidate, int]]],
    top: int = 5,
    decay: float = 0.5,
) -> list[Candidate]:
    """Add graph neighbours of the ``top`` results: each ``(candidate, hops)`` from
    ``neighbours`` scores ``parent.score * decay ** hops`` unless already ranked higher.
    Returns a new list, best first."""
    by_key = {c.key: c for c in ranked}
    for parent in ranked[:top]:
        for cand, hops in neighbours(parent):
            score = parent.score * decay**hops
            if cand.key not in by_key or by_key[cand.key].score < score:
                by_key[cand.key] = Candidate(**{**vars(cand), "score": score})
    return sorted(by_key.values(), key=lambda c: -c.score)
