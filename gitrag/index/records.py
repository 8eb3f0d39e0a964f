"""Value types the index's modules share, so that none depends on another for a type alone:

    SparseVec   a sparse vector, made by :mod:`gitrag.index.sparse`, cached by
                :mod:`gitrag.index.vector_cache`, written to the store's points
    BranchView  which points of the shared collection a branch sees, from
                :mod:`gitrag.index.state`'s membership, read by the store's searches

:mod:`gitrag.index.store` re-exports both (its protocol speaks of them).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BranchView", "SparseVec"]


@dataclass(frozen=True)
class SparseVec:
    """Sparse vector: parallel lists of uint32 term ids (sorted, unique) and float weights."""

    indices: list[int]
    values: list[float]


@dataclass(frozen=True)
class BranchView:
    """Which points a branch sees: those whose ``branches`` hold ``tag``, or, when the branch
    has a ``root`` (the branch it was started from, whose points it shares without being
    named on them), those whose ``branches`` hold ``root`` and whose ``hidden`` do not
    hold ``tag``. A plain string stands for ``BranchView(tag)``."""

    tag: str
    root: str | None = None
