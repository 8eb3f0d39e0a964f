"""Multi-query fusion for a pasted issue: each part's own lists vote beside the whole text's.

    a pasted question -> its parts (gitrag.query.ranking.parts: title, prose, code blocks)
    -> retrieval reads each part's dense and sparse list (PART_DEPTH deep, ids only) and adds
       each list's top PART_TOP chunks to the candidates
    -> :func:`fuse_parts`: score = (1 - PART_WEIGHT) x the whole text's fused score
                                 + PART_WEIGHT x the parts' reciprocal-rank fusion (normalised)

Why: the whole text's lists weigh its terms by count, so the longest part decides (a
forty-line reproduction over the title's five words that name the subsystem), and the
embedder reads only the digest's first 256 tokens. A chunk that one part's own lists put
first is evidence, even when the whole text's lists put it at rank 200. Reciprocal rank
fusion (Cormack et al. 2009, k = 60) fuses lists whose scores are not comparable (a title's
BM25 and a code block's) by rank alone, as RAG-Fusion fuses a question's rewritings.
"""

from __future__ import annotations

from collections.abc import Sequence

from gitrag.query.ranking import parts
from gitrag.query.ranking.query import Query
from gitrag.query.ranking.stages import Candidate

RRF_K = 60  # Cormack et al. 2009
#: The parts' fused ranks as a share of the score, the whole text's fusion the rest: equal
#: voices (the whole text is one reading of the issue, its parts together another).
PART_WEIGHT = 0.5
PART_DEPTH = 100  # each part's lists are read this deep for the fusion
PART_TOP = 20  # each part list's best chunks join the candidates


def part_texts(query: Query) -> list[str]:
    """The texts of a pasted question's parts to search on their own (title, prose, code
    blocks); [] for a typed question or one with a single part (its lists would be the whole's)."""
    if not query.long:
        return []
    split = parts.split(query.text)
    texts = [t for name in ("title", "prose", "code") for t in split.get(name, [])]
    return texts if len(texts) > 1 else []


def rrf(lists: Sequence[Sequence[str]], k: int = RRF_K) -> dict[str, float]:
    """``{id: sum over lists of 1 / (k + rank)}`` (rank 1-based) of best-first id lists."""
    out: dict[str, float] = {}
    for ids in lists:
        for rank, key in enumerate(ids, 1):
            out[key] = out.get(key, 0.0) + 1.0 / (k + rank)
    return out


def fuse_parts(cands: dict[str, Candidate], lists: Sequence[Sequence[str]], weight: float | None = None) -> None:
    """Mix the parts' reciprocal-rank fusion into the fused scores (in place):
    ``(1 - weight) x score + weight x rrf / max rrf`` over the candidates (``weight``: default
    ``PART_WEIGHT``); nothing without lists."""
    weight = PART_WEIGHT if weight is None else weight
    fused = rrf(lists)
    top = max((fused.get(key, 0.0) for key in cands), default=0.0)
    if top <= 0:
        return
    for key, c in cands.items():
        c.score = (1.0 - weight) * c.score + weight * fused.get(key, 0.0) / top
