"""Git history as the questions read it: the similar-fix file prior of the ranking
(:func:`similar_files`), over the commit index that ``gitrag log`` and ``ask --blame`` read too.

The commit index is kept current by the same sync that indexes a branch
(:func:`gitrag.index.history.sync_branch`, called by ``Indexer.sync_history``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

from gitrag.index.history import MAX_COMMITS, Commit, HistoryIndex, UpdateSummary, open_index

if TYPE_CHECKING:
    from gitrag.index.workspace import Workspace

__all__ = ["MAX_COMMITS", "Commit", "HistoryIndex", "UpdateSummary", "open_index", "similar_files"]

log = structlog.get_logger("gitrag.query.history")


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
    from gitrag.errors import StateError
    from gitrag.index.history import DAMAGE, discard, is_damage

    try:
        with open_index(ws) as hist:
            commits = hist.search(branch, text, k=hp.SIMILAR_COMMITS, max_files=hp.MAX_FIX_FILES, terms=terms,
                                  max_share=hp.COMMON_TERM_SHARE, max_terms=hp.MAX_TERMS)
    except (*DAMAGE, StateError) as exc:  # no prior for this question
        if is_damage(exc):  # read anew by the next syncs
            log.warning("history.db is damaged: discarded (the next syncs read the history again)", error=repr(exc))
            discard(ws.data_dir)
        else:  # cannot be read now (I/O, permissions): kept
            log.warning("history.db cannot be read: no history prior", error=repr(exc))
        return {}
    return hp.file_prior((c.score, [f.path for f in c.files], c.n_files) for c in commits)
