"""Retrieval metrics for one question and their means: Recall@1/5/10, MRR@10, nDCG@10.

Definitions follow ``bench/eval/README.md``. A result *hits* a target when the paths
match and, if the target has a span, the line spans overlap
(``r.start_line <= t.end_line and t.start_line <= r.end_line``); a file-level target is
hit by any result of its file. Two path rules:

- exact (click JSONL): the paths are equal;
- suffix (semble, upstream ``benchmarks/data.py: path_matches``): after ``\\`` -> ``/``
  the paths are equal or either ends with ``/`` + the other.

nDCG@10 uses binary gains as in semble ``benchmarks/metrics.py``: rank r gains
``1 / log2(r + 1)`` when it is the first match of at least one target (once per rank,
however many targets first match there); IDCG sums the same over ranks
``1..min(10, #targets)``; 0 when there are no targets. The click README's rule ("a chunk
gains when it hits a target not already hit") is the same formula, so one function
serves both. ``file_level`` mode is for tools that return files (grep, upstream's
ripgrep): results are deduplicated by path in first-seen order and spans are ignored.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from gitrag.query.evaluation.datasets import Target

DEPTH = 10
METRICS: tuple[str, ...] = ("recall@1", "recall@5", "recall@10", "mrr@10", "ndcg@10")

Scores = dict[str, float]


class Located(Protocol):
    """Anything with a repository path and a 1-based inclusive line span."""

    @property
    def path(self) -> str: ...

    @property
    def start_line(self) -> int: ...

    @property
    def end_line(self) -> int: ...


@dataclass(frozen=True)
class Result:
    """One ranked search result: ``path`` and 1-based inclusive lines; ``score`` is informative."""

    path: str
    start_line: int
    end_line: int
    score: float = 0.0


def normalise_path(path: str) -> str:
    return path.replace("\\", "/")


def path_matches(result_path: str, target_path: str, *, suffix_paths: bool = False) -> bool:
    """Exact equality, or semble's rule (equal or one ends with ``/`` + the other)."""
    if not suffix_paths:
        return result_path == target_path
    a, b = normalise_path(result_path), normalise_path(target_path)
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def hits(result: Located, target: Target, *, suffix_paths: bool = False, file_level: bool = False) -> bool:
    """True when ``result`` hits ``target`` (see the module docstring)."""
    if not path_matches(result.path, target.path, suffix_paths=suffix_paths):
        return False
    if file_level or target.start_line is None or target.end_line is None:
        return True
    return result.start_line <= target.end_line and target.start_line <= result.end_line


def ranking(results: Iterable[Located], *, file_level: bool = False, depth: int = DEPTH) -> list[Located]:
    """The list the metrics look at: the first ``depth`` results; in ``file_level`` mode
    only the first result of each (normalised) path counts, as upstream's file tools do."""
    ranked: list[Located] = []
    seen: set[str] = set()
    for result in results:
        if len(ranked) >= depth:
            break
        if file_level:
            key = normalise_path(result.path)
            if key in seen:
                continue
            seen.add(key)
        ranked.append(result)
    return ranked


def target_ranks(
    results: Sequence[Located],
    targets: Sequence[Target],
    *,
    suffix_paths: bool = False,
    file_level: bool = False,
) -> list[int | None]:
    """1-based rank of the first result hitting each target (None if none), per target."""
    ranks: list[int | None] = []
    for target in targets:
        found = (
            i
            for i, result in enumerate(results, 1)
            if hits(result, target, suffix_paths=suffix_paths, file_level=file_level)
        )
        ranks.append(next(found, None))
    return ranks


def scores_from_ranks(ranks: Sequence[int | None], depth: int = DEPTH) -> Scores:
    """Recall@1/5/10, MRR@10 and nDCG@10 from each target's first-hit rank.

    ``ranks`` has one entry per target; ranks beyond ``depth`` count as misses.
    """
    n = len(ranks)
    found = [r for r in ranks if r is not None and r <= depth]
    if n == 0:
        return dict.fromkeys(METRICS, 0.0)
    scores = {f"recall@{k}": sum(r <= k for r in found) / n for k in (1, 5, 10)}
    scores["mrr@10"] = 1.0 / min(found) if found else 0.0
    dcg = sum(1.0 / math.log2(r + 1) for r in set(found))
    idcg = sum(1.0 / math.log2(r + 1) for r in range(1, min(depth, n) + 1))
    scores["ndcg@10"] = dcg / idcg
    return scores


def score_question(
    results: Iterable[Located],
    targets: Sequence[Target],
    *,
    suffix_paths: bool = False,
    file_level: bool = False,
) -> Scores:
    """Every metric of :data:`METRICS` for one question's ranked ``results`` (best first).

    Only the top 10 (after per-file dedup in ``file_level`` mode) are considered.
    """
    ranked = ranking(results, file_level=file_level)
    ranks = target_ranks(ranked, targets, suffix_paths=suffix_paths, file_level=file_level)
    return scores_from_ranks(ranks)


def mean_scores(per_question: Sequence[Scores]) -> Scores:
    """Mean of each metric over questions; all zeros for an empty list."""
    if not per_question:
        return dict.fromkeys(METRICS, 0.0)
    return {m: sum(s[m] for s in per_question) / len(per_question) for m in METRICS}


def aggregate(per_question: Iterable[tuple[str, Scores]]) -> tuple[Scores, dict[str, Scores]]:
    """``(overall, by_kind)`` from ``(kind, scores)`` pairs: means over all questions and
    over each kind's questions (kinds sorted by name)."""
    pairs = list(per_question)
    groups: dict[str, list[Scores]] = defaultdict(list)
    for kind, scores in pairs:
        groups[kind].append(scores)
    by_kind = {kind: mean_scores(groups[kind]) for kind in sorted(groups)}
    return mean_scores([s for _, s in pairs]), by_kind
