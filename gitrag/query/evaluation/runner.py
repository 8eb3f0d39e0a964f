"""Run a question set against several search modes side by side and score them.

A *searcher* is any callable ``query -> ranked results`` (objects with ``path``,
``start_line``, ``end_line``); the runner times each call, drops results outside
``scope``, keeps the top ``k`` and scores them with :mod:`gitrag.query.evaluation.metrics`.
:meth:`EvalReport.to_json` produces the ``gitrag eval --json`` object documented field
by field in the README ("JSON output").
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gitrag.query.evaluation.datasets import Dataset, Question
from gitrag.query.evaluation.metrics import (
    METRICS,
    Located,
    Scores,
    aggregate,
    mean_scores,
    ranking,
    scores_from_ranks,
    target_ranks,
)

Searcher = Callable[[str], Sequence[Located]]

#: Modes whose searchers return files, scored in metrics' ``file_level`` mode.
FILE_LEVEL_MODES: frozenset[str] = frozenset({"grep", "ripgrep"})


@dataclass(frozen=True)
class QuestionRun:
    """One question under one mode: scores, latency in ms, each target's first-hit rank."""

    id: str
    kind: str
    scores: Scores
    latency_ms: float
    ranks: list[int | None]


@dataclass(frozen=True)
class ModeReport:
    """One mode's means (overall and per kind) and latency percentiles in ms."""

    overall: Scores
    by_kind: dict[str, Scores]
    latency_ms: dict[str, float]
    file_level: bool
    runs: list[QuestionRun] = field(default_factory=list)

    def to_json(self, per_question: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "overall": dict(self.overall),
            "by_kind": {kind: dict(s) for kind, s in self.by_kind.items()},
            "latency_ms": dict(self.latency_ms),
            "file_level": self.file_level,
        }
        if per_question:
            out["per_question"] = [_run_json(run) for run in self.runs]
        return out


def _run_json(run: QuestionRun) -> dict[str, Any]:
    return {"id": run.id, "kind": run.kind, **run.scores, "latency_ms": run.latency_ms, "ranks": run.ranks}


@dataclass(frozen=True)
class EvalReport:
    """Every mode's results for one question set. ``format`` is ``click``/``semble``/""."""

    questions: int
    modes: dict[str, ModeReport]
    k: int = 10
    scope: str | None = None
    dataset: str | None = None
    format: str = ""
    headline: str = "recall@10"

    def to_json(self, per_question: bool = False) -> dict[str, Any]:
        """The contract object ``{"questions", "modes": {MODE: {"overall", "by_kind",
        "latency_ms"}}}`` plus ``dataset``, ``format``, ``headline``, ``k``, ``scope``
        and, with ``per_question``, each mode's per-question list."""
        return {
            "questions": self.questions,
            "modes": {name: mode.to_json(per_question) for name, mode in self.modes.items()},
            "dataset": self.dataset,
            "format": self.format,
            "headline": self.headline,
            "k": self.k,
            "scope": self.scope,
        }


def in_scope(path: str, scope: str | None) -> bool:
    """True when there is no scope or ``path`` (``\\`` -> ``/``) starts with it."""
    return not scope or path.replace("\\", "/").startswith(scope)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100), linear interpolation (numpy's default); 0 if empty."""
    if not values:
        return 0.0
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def run_eval(
    questions: Sequence[Question],
    searchers: Mapping[str, Searcher],
    k: int = 10,
    scope: str | None = None,
    *,
    suffix_paths: bool = False,
    file_level_modes: Collection[str] = FILE_LEVEL_MODES,
    dataset: str | None = None,
    dataset_format: str = "",
    headline: str = "recall@10",
) -> EvalReport:
    """Run every searcher on every question and score it (modes in ``searchers`` order).

    ``k``: results kept per query after dropping those outside ``scope`` (a path prefix);
    metrics look at most at the top 10. Give searchers enough results for the scope
    (or apply the scope in the search itself). ``suffix_paths``: semble's path rule.
    Modes named in ``file_level_modes`` are scored per file (see metrics' file_level).
    """
    modes = {
        name: _run_mode(questions, searcher, k, scope, suffix_paths, file_level=name in file_level_modes)
        for name, searcher in searchers.items()
    }
    return EvalReport(len(questions), modes, k, scope, dataset, dataset_format, headline)


def run_dataset(
    data: Dataset,
    searchers: Mapping[str, Searcher],
    k: int = 10,
    scope: str | None = None,
    *,
    file_level_modes: Collection[str] = FILE_LEVEL_MODES,
) -> EvalReport:
    """:func:`run_eval` with the dataset's path rule and headline; ``scope`` defaults to
    the dataset's (``SEMBLE_ROOTS`` for semble files, none for JSONL); ``""`` disables it."""
    return run_eval(
        data.questions,
        searchers,
        k,
        scope if scope is not None else data.scope,
        suffix_paths=data.suffix_paths,
        file_level_modes=file_level_modes,
        dataset=data.name,
        dataset_format=data.format,
        headline=data.headline,
    )


def _run_mode(
    questions: Sequence[Question],
    searcher: Searcher,
    k: int,
    scope: str | None,
    suffix_paths: bool,
    *,
    file_level: bool,
) -> ModeReport:
    runs = [_run_question(q, searcher, k, scope, suffix_paths, file_level) for q in questions]
    overall, by_kind = aggregate((run.kind, run.scores) for run in runs)
    latencies = [run.latency_ms for run in runs]
    latency = {"p50": percentile(latencies, 50), "p95": percentile(latencies, 95)}
    return ModeReport(overall, by_kind, latency, file_level, runs)


def _run_question(
    question: Question, searcher: Searcher, k: int, scope: str | None, suffix_paths: bool, file_level: bool
) -> QuestionRun:
    started = time.perf_counter()
    results = searcher(question.query)
    latency_ms = (time.perf_counter() - started) * 1000.0
    kept = [r for r in results if in_scope(r.path, scope)][:k]
    ranked = ranking(kept, file_level=file_level)
    ranks = target_ranks(ranked, question.targets, suffix_paths=suffix_paths, file_level=file_level)
    return QuestionRun(question.id, question.kind, scores_from_ranks(ranks), latency_ms, ranks)


def mean_over_reports(reports: Sequence[EvalReport]) -> dict[str, Scores]:
    """Per mode, the mean of each report's overall scores: semble's published "Overall"
    is the mean over repos, not over queries. Modes missing from a report are skipped."""
    names = {name for report in reports for name in report.modes}
    return {
        name: mean_scores([r.modes[name].overall for r in reports if name in r.modes])
        for name in sorted(names)
    }


__all__ = [
    "FILE_LEVEL_MODES",
    "METRICS",
    "EvalReport",
    "ModeReport",
    "QuestionRun",
    "Searcher",
    "in_scope",
    "mean_over_reports",
    "percentile",
    "run_dataset",
    "run_eval",
]
