"""Self-healing: a damaged collection is moved aside and rebuilt from the vector cache and git.

Everything in the store is derived: the manifests in ``state.db`` say which points each
branch holds, the vector cache holds their vectors (checked by their digests), git holds
their text. So when the engine cannot read a collection, or a point it returns fails its
checks (gitrag.index.integrity), the collection is:

    moved aside (``<name>.damaged-<pid>-<n>``, under the collection's lock)
    -> rebuilt by a sync: the indexer finds no collection and fills a new one from the
       manifests and the cache (gitrag.index.views.rebuild); a vector the cache lost is embedded
       again, nothing else is
    -> the moved copy deleted, once the rebuild is complete.

:func:`syncing` does this around a sync (and first, on request: ``gitrag index --rebuild``),
:func:`answering` around a query; each heals once, then lets a second failure through (a
one-line StoreDamaged error naming the collection and ``gitrag index --rebuild``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import structlog

from gitrag.errors import StoreDamaged

log = structlog.get_logger("gitrag.index.heal")
T = TypeVar("T")


def collections_of(ws: Any) -> list[str]:
    """The collections of the repository's branches (and the configured embedder's)."""
    names = {b.collection for b in ws.state.branches()}
    try:
        names.add(ws.collection())
    except Exception:  # noqa: BLE001 - no embedder configured that can be made: the branches' ones only
        pass
    return sorted(names)


def move_aside(ws: Any, names: list[str] | None = None) -> list[Path]:
    """Move the collections ``names`` (default: all of the repository's) aside; a server
    store's are dropped instead. Returns the folders moved aside."""
    store, aside = ws.store, []
    for name in names if names is not None else collections_of(ws):
        mover = getattr(store, "move_aside", None)
        if mover is None:
            store.drop_collection(name)
            continue
        moved = mover(name)
        if moved is not None:
            aside.append(moved)
    return aside


def delete_aside(ws: Any, aside: list[Path]) -> None:
    deleter = getattr(ws.store, "delete_aside", None)
    for path in aside:
        if deleter is not None:
            deleter(path)


def syncing(ws: Any, sync: Callable[[], T], rebuild: bool = False) -> T:
    """``sync()``, healed: with ``rebuild`` the collections are moved aside first (and
    rebuilt by the sync); a StoreDamaged during the sync moves them aside and syncs again,
    once. The moved copies are deleted when the sync that rebuilt them returns."""
    aside = move_aside(ws) if rebuild else []
    try:
        result = sync()
    except StoreDamaged as exc:
        log.warning("store damaged: moving it aside and rebuilding it from the vector cache", error=str(exc))
        aside += move_aside(ws)
        result = sync()
    delete_aside(ws, aside)
    return result


def rebuild(ws: Any) -> Any:
    """Move the repository's collections aside and rebuild them with a sync of the current
    branch; returns its IndexSummary."""
    from gitrag.index.indexer import Indexer

    aside = move_aside(ws)
    summary = Indexer(ws).sync()
    delete_aside(ws, aside)
    return summary


def answering(ws: Any, ask: Callable[[], T]) -> T:
    """``ask()``; on StoreDamaged the store is rebuilt (:func:`rebuild`) and asked again, once."""
    try:
        return ask()
    except StoreDamaged as exc:
        log.warning("store damaged: rebuilding it from the vector cache before answering", error=str(exc))
        rebuild(ws)
        return ask()
