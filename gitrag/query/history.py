"""Git history: the commit index (messages, authors, dates, changed paths), kept current by
the same sync that indexes a branch, and what is read from it: ``gitrag log``, the
similar-fix file prior of the ranking, ``ask --blame``.

    sync(branch, HEAD) -> :func:`sync_branch`: walk the commits new since the branch's
    history head -> first-parent tree diff of each (renames found) -> SQLite + FTS5 terms
    (gitrag.index.history)

The call site in the indexer is ``Indexer.sync`` (``sync_history``; the daemon runs it right after counting the code sync); a failure here
is logged and never stops the code index.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

from gitrag.index.history import MAX_COMMITS, Commit, HistoryIndex, UpdateSummary

if TYPE_CHECKING:
    from gitrag.index.workspace import Workspace

__all__ = ["BUDGET_SHARE", "MAX_COMMITS", "Commit", "HistoryIndex", "UpdateSummary", "open_index", "similar_files",
           "sync_branch"]

log = structlog.get_logger("gitrag.query.history")

#: A sync spends at most this share of its own (code) time reading older history; after the
#: repository's first read, MIN_BUDGET_S if that is more. So history adds less than a tenth
#: to a first index (the issue's bound: 0.1 itself came out at 10.5-11% on click, the read
#: stops only between steps of 32 commits and then writes the branch's rows), and the rest of
#: a long history comes with the next syncs (hooks, the daemon's reconciles, `gitrag index`),
#: each reading ~1,500 more commits (click's 3,329 are all read by the third sync).
BUDGET_SHARE = 0.08
MIN_BUDGET_S = 0.5


def similar_files(ws: Workspace, branch: str, text: str, term_weights: dict[str, float] | None = None) -> dict[str, float]:
    """The similar-fix prior of a question (gitrag.query.ranking.history_prior.file_prior over the
    commits of ``branch`` whose message and paths best match ``text``, or the heaviest
    ``term_weights`` of a long question); {} when the repository has no history index."""
    from gitrag.index.history import MAX_QUERY_TERMS
    from gitrag.query.ranking import history_prior as hp

    if not (ws.data_dir / "history.db").exists():
        return {}
    terms = None
    if term_weights:
        terms = [t for t, _ in sorted(term_weights.items(), key=lambda kv: -kv[1])[:MAX_QUERY_TERMS]]
    from gitrag.index.history import DAMAGE, discard

    try:
        with open_index(ws) as hist:
            commits = hist.search(branch, text, k=hp.SIMILAR_COMMITS, max_files=hp.MAX_FIX_FILES, terms=terms,
                                  max_share=hp.COMMON_TERM_SHARE, max_terms=hp.MAX_TERMS)
    except DAMAGE as exc:  # a damaged history.db: no prior for this question, read anew by the next syncs
        log.warning("history.db is damaged: discarded (the next syncs read the history again)", error=repr(exc))
        discard(ws.data_dir)
        return {}
    return hp.file_prior((c.score, [f.path for f in c.files], c.n_files) for c in commits)


def open_index(ws: Workspace) -> HistoryIndex:
    """The repository's commit index (``<data dir>/history.db``), created when missing."""
    return HistoryIndex(ws.data_dir)


def sync_branch(ws: Workspace, branch: str, head: str, code_seconds: float | None = None) -> UpdateSummary | None:
    """Bring ``branch``'s commit history to ``head`` (see HistoryIndex.update), reading
    older commits for ``BUDGET_SHARE`` x ``code_seconds`` (the sync's code part; None: all
    of them; at least MIN_BUDGET_S once the repository has a history), and forget
    the history of branches the state no longer has. None when it failed (logged: the
    history is a ranking aid and a command of its own, never a reason to fail a sync)."""
    try:
        with open_index(ws) as hist:
            budget = None if code_seconds is None else BUDGET_SHARE * code_seconds
            if budget is not None and hist.has_commits():  # not the repository's first read: the floor
                budget = max(MIN_BUDGET_S, budget)
            summary = hist.update(ws.repo.repo, branch, head, budget_s=budget)
            hist.prune(b.name for b in ws.state.branches())
        if summary.commits_read:
            log.info("history", branch=branch, read=summary.commits_read, reachable=summary.commits_reachable,
                     seconds=summary.seconds)
        return summary
    except Exception as exc:  # noqa: BLE001 - a full disk, a corrupt history.db: the code index goes on
        from gitrag.index.history import DAMAGE, discard

        log.warning("history update failed", branch=branch, error=repr(exc))
        if isinstance(exc, DAMAGE):  # derived from git alone: the next sync reads it anew
            discard(ws.data_dir)
        return None
