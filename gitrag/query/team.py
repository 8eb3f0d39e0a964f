"""Answers from a team's shared index on a Qdrant server (docs/team.md).

With ``team_url`` set (user config or ``GITRAG_TEAM_URL``), ``gitrag ask`` answers from the
server's published collection: the reader's copy of the published manifest
(gitrag.index.mirror) drives the same retrieval and ranking as a local index; only the
question is embedded, and snippets are read from this clone's own git by blob. When HEAD
is ahead of the published commit (local commits not published yet) or the work tree is
dirty, the files that differ are searched from this clone (the work-tree overlay,
gitrag.query.worktree: they are chunked, and embedded unless the vector cache has them) and
their published points are left out; ``team`` in the JSON and the freshness line say so.

Any failure of the server (unreachable, API key refused, nothing published for this
repository, embedder and pipeline) is one line from :func:`ask`'s caller and the answer
comes from the local index instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gitrag.config import Settings
from gitrag.errors import ConfigError, StoreDamaged, StoreError, TeamUnavailable
from gitrag.index import mirror, team
from gitrag.index.workspace import Workspace
from gitrag.query import retrieval
from gitrag.query.results import AskResponse


def team_info(m: mirror.Mirror, ws: Workspace, response: AskResponse | None = None) -> dict[str, Any]:
    """The ``team`` JSON object of an answer (see docs/team.md)."""
    repo = ws.repo
    head, commit = repo.head(), m.published["commit"]
    ahead = repo.distance(commit, head) if head and head != commit and repo.has_commit(commit) else 0
    overlay = response.worktree if response is not None else None
    return {
        "server": getattr(m.ws.store, "url", ""), "collection": m.collection, "published_branch": m.published_branch,
        "published_commit": commit, "generation": int(m.published["gen"]), "commits_ahead": ahead,
        "local_overlay": bool(overlay and overlay.get("searched") and (overlay.get("files") or overlay.get("hidden"))),
        "pulled_paths": m.pulled_paths,
    }


def _read_history(m: mirror.Mirror) -> None:
    """This clone's commit history to HEAD beside the copy (the ranking's ``history`` stage
    reads it, as a writer's does): read from git, all of it the first time (a writer's sync
    read it too: the same history, the same ranking), then at most MIN_BUDGET_S a question;
    a failure is logged, never fatal (gitrag.index.history.sync_branch)."""
    from gitrag.index import history

    head = m.ws.repo.head()
    if head is None:
        return
    try:
        with history.open_index(m.ws) as hist:
            first = not hist.has_commits()
    except Exception:  # noqa: BLE001 - the history is a ranking aid: sync_branch logs its own failures
        first = False
    budget = None if first else history.MIN_BUDGET_S / history.BUDGET_SHARE
    history.sync_branch(m.ws, m.ws.repo.branch(), head, code_seconds=budget)


def ask(ws: Workspace, settings: Settings, question: str, notice: Callable[[str], None], **kw: Any) -> AskResponse | None:
    """``retrieval.ask`` over the team server, or None after one ``notice`` line when the
    server cannot answer (the caller answers from the local index). ``kw``: retrieval.ask's
    arguments (``worktree_overlay`` is forced on: unpublished commits are searched locally)."""
    try:
        server = team.open_server(settings)
    except StoreError as exc:
        notice(f"team server not used: {exc}; answering from the local index")
        return None
    try:
        try:
            m = mirror.open_mirror(ws, server, settings)
        except (StoreError, TeamUnavailable, ConfigError) as exc:  # ConfigError: a shallow clone, a bad team_repo_id
            notice(f"team server not used: {exc}; answering from the local index")
            return None
        try:
            _read_history(m)
            kw["worktree_overlay"] = True
            response = retrieval.ask(m.ws, question, **kw)
        except StoreDamaged as exc:  # never "healed" from here: the collection is the writer's
            notice(f"team server not used: {exc} (the team's writer republishes with `gitrag index --publish`); "
                   f"answering from the local index")
            return None
        except StoreError as exc:
            notice(f"team server not used: {exc}; answering from the local index")
            return None
        finally:
            m.ws.state.close()
        response.team = team_info(m, ws, response)
        return response
    finally:
        try:
            server.close()
        except StoreError:
            pass
