"""Human-readable ``gitrag eval`` output: rich tables with the modes side by side.

:func:`report_tables` gives one table of metrics (rows) by modes (columns) for all
questions and one per kind; for semble label files :func:`published_table` sets our
nDCG@10 beside the published scores of ``bench/eval/semble/README.md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from gitrag.query.evaluation.metrics import METRICS, Scores
from gitrag.query.evaluation.runner import EvalReport

SEMBLE_REPOS: tuple[str, ...] = ("fastapi", "flask", "requests")
_LABELS = {
    "recall@1": "Recall@1",
    "recall@5": "Recall@5",
    "recall@10": "Recall@10",
    "mrr@10": "MRR@10",
    "ndcg@10": "nDCG@10",
}


@dataclass(frozen=True)
class PublishedScore:
    """A tool's published semble nDCG@10 per repo; ``overall`` is its mean over all repos
    of the whole benchmark (63), so it is not the mean of these three columns."""

    tool: str
    fastapi: float
    flask: float
    requests: float
    overall: float

    def repo(self, name: str) -> float:
        return float(getattr(self, name))


#: Copied from ``bench/eval/semble/README.md`` ("Published scores (nDCG@10)"), which
#: took them from upstream ``benchmarks/results/*.json``.
PUBLISHED_SCORES: tuple[PublishedScore, ...] = (
    PublishedScore("semble hybrid, potion-code-16M", 0.787, 0.913, 0.965, 0.854),
    PublishedScore("CodeRankEmbed Hybrid", 0.851, 0.909, 0.992, 0.862),
    PublishedScore("CodeRankEmbed Hybrid, later run", 0.837, 0.914, 0.990, 0.861),
    PublishedScore("CodeRankEmbed, later run", 0.801, 0.890, 0.974, 0.839),
    PublishedScore("CodeRankEmbed", 0.736, 0.759, 0.895, 0.765),
    PublishedScore("ColGREP", 0.717, 0.741, 0.846, 0.693),
    PublishedScore("zvec-grep", 0.712, 0.676, 0.834, 0.670),
    PublishedScore("BM25 raw (semble ablation)", 0.620, 0.585, 0.641, 0.675),
    PublishedScore("potion-code-16M raw (semble ablation)", 0.620, 0.698, 0.811, 0.650),
    PublishedScore("ck, hybrid regex + bge-small", 0.648, 0.671, 0.913, 0.646),
    PublishedScore("GitNexus", 0.625, 0.676, 0.947, 0.635),
    PublishedScore("codegraph", 0.657, 0.765, 0.856, 0.539),
    PublishedScore("grepai", 0.491, 0.636, 0.751, 0.561),
    PublishedScore("probe", 0.420, 0.516, 0.515, 0.387),
    PublishedScore("ripgrep, fixed strings", 0.182, 0.212, 0.232, 0.126),
)


def metrics_table(title: str, columns: dict[str, Scores], headline: str = "") -> Table:
    """Rows = metrics, columns = modes; the ``headline`` metric's row is bold."""
    table = Table(title=title, title_justify="left")
    table.add_column("metric")
    for name in columns:
        table.add_column(name, justify="right")
    for metric in METRICS:
        cells = [f"{columns[name].get(metric, 0.0):.3f}" for name in columns]
        table.add_row(_LABELS[metric], *cells, style="bold" if metric == headline else None)
    return table


def report_tables(report: EvalReport) -> list[Table]:
    """The overall table (with latency p50/p95 rows) and one table per kind."""
    name = report.dataset or "questions"
    title = f"{name}: {report.questions} questions, k={report.k}"
    if report.scope:
        title += f", scope {report.scope}"
    overall = metrics_table(title, {mode: m.overall for mode, m in report.modes.items()}, report.headline)
    for pct in ("p50", "p95"):
        overall.add_row(f"latency {pct} ms", *(f"{m.latency_ms[pct]:.1f}" for m in report.modes.values()))
    tables = [overall]
    for kind in _kinds(report):
        columns = {mode: m.by_kind.get(kind, {}) for mode, m in report.modes.items()}
        tables.append(metrics_table(f"{name}: kind {kind}", columns, report.headline))
    return tables


def _kinds(report: EvalReport) -> list[str]:
    return sorted({kind for m in report.modes.values() for kind in m.by_kind})


def published_table(reports: Sequence[EvalReport]) -> Table | None:
    """Our nDCG@10 per semble repo beside the published scores, best first; None when no
    report is a semble set. Our "overall" is the mean over repos, shown only when all
    three repos were run (the published one averages 63 repos)."""
    ours = {r.dataset: r for r in reports if r.format == "semble" and r.dataset in SEMBLE_REPOS}
    if not ours:
        return None
    repos = [repo for repo in SEMBLE_REPOS if repo in ours]
    sort_column = "overall" if len(repos) == len(SEMBLE_REPOS) else repos[0]
    rows: list[tuple[str, dict[str, float], bool]] = [
        (p.tool, {**{r: p.repo(r) for r in repos}, "overall": p.overall}, False) for p in PUBLISHED_SCORES
    ]
    for mode in _modes(ours.values()):
        values = {r: ours[r].modes[mode].overall["ndcg@10"] for r in repos if mode in ours[r].modes}
        if len(repos) == len(SEMBLE_REPOS) and len(values) == len(repos):
            values["overall"] = sum(values.values()) / len(values)
        rows.append((f"gitrag {mode}", values, True))
    rows.sort(key=lambda row: -row[1].get(sort_column, -1.0))
    return _published(rows, repos)


def _modes(reports: Iterable[EvalReport]) -> list[str]:
    seen: list[str] = []
    for report in reports:
        seen += [mode for mode in report.modes if mode not in seen]
    return seen


def _published(rows: list[tuple[str, dict[str, float], bool]], repos: list[str]) -> Table:
    table = Table(title="semble benchmark, nDCG@10 (published vs gitrag)", title_justify="left")
    table.add_column("tool")
    for column in [*repos, "overall"]:
        table.add_column(column, justify="right")
    for tool, values, mine in rows:
        cells = [f"{values[c]:.3f}" if c in values else "-" for c in [*repos, "overall"]]
        table.add_row(tool, *cells, style="bold" if mine else None)
    return table


def print_report(reports: EvalReport | Sequence[EvalReport], console: Console | None = None) -> None:
    """Print every report's tables, then the published comparison for semble sets."""
    batch = [reports] if isinstance(reports, EvalReport) else list(reports)
    out = console or Console()
    for report in batch:
        for table in report_tables(report):
            out.print(table)
    comparison = published_table(batch)
    if comparison is not None:
        out.print(comparison)
        out.print("Published 'overall' is upstream's mean over 63 repos; ours is over these repos only.")
