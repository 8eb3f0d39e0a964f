"""Any revision: ``ask --rev REV`` answers from that commit's tree.

    REV (a tag, a commit, ``HEAD~20``, ``main@{2}``) -> its commit (git's revision syntax)
    -> the revision view ``(rev <commit>)``: a view of the shared collection, built by the
       ordinary incremental sync (gitrag.index.indexer) from the nearest indexed branch or view (by
       merge-base distance), so only the diff is chunked and only chunks never seen are
       embedded (the vector cache answers for the rest)
    -> searched like a branch; the views beyond REVISION_VIEWS are forgotten, least recently
       used first (a view is a few payload tags on shared points plus the file list of its
       diff, so keeping some is cheap, and a forgotten one comes back from the cache)

A view's name holds a space, which no git branch name can, so it never meets a branch.
"""

from __future__ import annotations

from collections.abc import Callable

from gitrag.errors import UnknownRevision as UnknownRevision  # defined there, named here too
from gitrag.index.indexer import Indexer, IndexSummary, forget_branch
from gitrag.index.store import SearchFilter
from gitrag.index.workspace import Workspace
from gitrag.query.retrieval import AskResponse, Freshness
from gitrag.query.retrieval import ask as run_ask

PREFIX = "(rev "
REVISION_VIEWS = 4  # revision views kept (LRU); the next one evicts the least recently used


def view_name(commit: str) -> str:
    return f"{PREFIX}{commit})"


def is_view(name: str) -> bool:
    """Whether a branch name of the state is a revision view."""
    return name.startswith(PREFIX) and name.endswith(")")


def resolve(ws: Workspace, rev: str) -> str:
    """The commit id ``rev`` names (git's revision syntax). Raises UnknownRevision."""
    return ws.repo.resolve(rev)


def ensure(ws: Workspace, rev: str, progress: Callable[[str, int, int], None] | None = None
           ) -> tuple[str, str, IndexSummary]:
    """(view name, commit, the sync's summary): the revision view of ``rev`` brought to its
    commit (nothing to do when it is there already), then the views beyond REVISION_VIEWS
    evicted. Raises UnknownRevision, and what a sync raises."""
    commit = resolve(ws, rev)
    name = view_name(commit)
    summary = Indexer(ws, progress).sync(branch=name, commit=commit)
    evict(ws, keep=name)
    return name, commit, summary


def evict(ws: Workspace, keep: str, budget: int = REVISION_VIEWS) -> list[str]:
    """Forget the least recently used revision views beyond ``budget`` (never ``keep``);
    returns their names."""
    views = sorted((b for b in ws.state.branches() if is_view(b.name)), key=lambda b: -(b.last_used or 0.0))
    gone = [b for b in views if b.name != keep][max(0, budget - 1):]
    for b in gone:
        forget_branch(ws, b)
    return [b.name for b in gone]


def ask(ws: Workspace, rev: str, question: str, *, k: int = 10, mode: str = "hybrid",
        scope: SearchFilter | None = None, expand: int = 0, files: bool = False, offset: int = 0,
        progress: Callable[[str, int, int], None] | None = None) -> AskResponse:
    """gitrag.query.retrieval.ask on the revision view of ``rev`` (built first, see :func:`ensure`):
    the freshness names the revision (``branch`` = the branch checked out, ``commit`` =
    ``head`` = the revision's commit), ``revision`` is ``rev`` as given, and the response's
    ``worktree`` says the work tree was not searched."""
    name, commit, _ = ensure(ws, rev, progress)
    fresh = Freshness(ws.repo.branch(), commit, commit, 0)
    response = run_ask(ws, question, k=k, mode=mode, scope=scope, expand=expand, files=files, offset=offset,
                       view=name, fresh=fresh)
    response.revision = rev
    return response
