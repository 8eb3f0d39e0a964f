"""Graph expansion after ranking (``ask --expand``): definitions the top results call,
import or inherit from join with score ``parent score * 0.5 ** hops``."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from gitrag.query.ranking.stages import Candidate, ordered, replace

DECAY = 0.5  # each hop away from a result halves the score: a callee of a callee is less likely the answer


def expand(
    ranked: list[Candidate],
    neighbours: Callable[[Candidate], Iterable[tuple[Candidate, int]]],
    top: int = 5,
    decay: float = DECAY,
) -> list[Candidate]:
    """Add graph neighbours of the ``top`` results: each ``(candidate, hops)`` from
    ``neighbours`` scores ``parent.score * decay ** hops`` unless already ranked higher.
    Returns a new list, best first (ties by path, line, point id)."""
    by_key = {c.key: c for c in ranked}
    for parent in ranked[:top]:
        for cand, hops in neighbours(parent):
            score = parent.score * decay**hops
            if cand.key not in by_key or by_key[cand.key].score < score:
                by_key[cand.key] = replace(cand, score=score)
    return ordered(by_key.values())
