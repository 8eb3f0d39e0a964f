"""Which repositories the daemon keeps current. Standard library only.

``<state dir>/repos.json``: ``{"version": 1, "repos": {COMMON_DIR: {"added": EPOCH_S,
"hooks": HOOKS_DIR, "id": REPO_ID}}}``, keyed by the resolved common git dir (one entry
serves the main work tree and every linked worktree); ``id`` is the repository's gitrag id
(:mod:`gitrag.identity`; absent for entries written before it was recorded, or a git dir
that cannot hold one). ``gitrag install`` adds, ``gitrag uninstall`` removes; the notifier
drops events of repositories not listed (a shared or global ``core.hooksPath`` fires for
every repository), and the daemon reconciles each listed one.

A folder moved or deleted leaves its entry behind: :func:`prune` (run by ``gitrag gc``,
``install``, ``uninstall`` and the daemon's reconcile) moves an entry to the place its
repository now is (the id's data folder records where it was last opened) and drops one
whose git dir is gone or holds another repository. A moved repository's hooks still count
as registered (:func:`is_registered` finds the entry by id), so its commits reach the
daemon, which moves the entry (:func:`follow`).
Writes are atomic (temp file + rename) under an flock on ``repos.json.lock``.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gitrag import config, identity


def registry_path() -> Path:
    return config.state_dir() / "repos.json"


def load(path: Path | None = None) -> dict[str, dict[str, Any]]:
    """``{common_dir: info}`` of every registered repository; {} when none or unreadable."""
    path = path or registry_path()
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    repos = data.get("repos") if isinstance(data, dict) else None
    return repos if isinstance(repos, dict) else {}


def is_registered(common_dir: str | Path, path: Path | None = None) -> bool:
    """Whether the repository is registered: at this path, or (moved) under a path that no
    longer holds it, with the same id."""
    repos = load(path)
    return str(Path(common_dir).resolve()) in repos or moved_from(common_dir, repos) is not None


def holds(common_dir: str | Path, repo_id: str | None) -> bool:
    """Whether ``common_dir`` is still a git dir and, when ``repo_id`` is known, still holds
    that repository (a folder moved away and a new repository made in its place does not)."""
    common = Path(common_dir)
    if not (common / "HEAD").is_file():
        return False
    return repo_id is None or identity.read_id(common) == repo_id


def moved_from(common_dir: str | Path, repos: dict[str, dict[str, Any]] | None = None) -> str | None:
    """The registered git dir this repository was moved from: an entry with the same id
    whose path no longer holds it; None when there is none (or the repository has no id)."""
    key = str(Path(common_dir).resolve())
    repo_id = identity.read_id(Path(key))
    if repo_id is None:
        return None
    for old, info in (load() if repos is None else repos).items():
        if old != key and info.get("id") == repo_id and not holds(old, repo_id):
            return old
    return None


def _moved_hooks(hooks: Any, old: str, new: str) -> Any:
    """A hooks folder inside the old git dir, at the same place inside the new one."""
    if isinstance(hooks, str) and Path(hooks).is_relative_to(old):
        return str(Path(new) / Path(hooks).relative_to(old))
    return hooks


@contextmanager
def _locked(path: Path) -> Iterator[dict[str, dict[str, Any]]]:
    config.private_mkdir(path.parent)
    with open(str(path) + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        repos = load(path)
        before = json.dumps(repos, sort_keys=True)
        yield repos
        if json.dumps(repos, sort_keys=True) == before:
            return  # nothing changed: nothing written
        tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"version": 1, "repos": repos}, indent=1, sort_keys=True) + "\n")
        os.replace(tmp, path)


def add(common_dir: str | Path, hooks_dir: str | Path | None = None, path: Path | None = None) -> bool:
    """Register a repository; returns False when it was registered already (info refreshed)."""
    key = str(Path(common_dir).resolve())
    with _locked(path or registry_path()) as repos:
        new = key not in repos
        info = repos.get(key) or {"added": round(time.time(), 3)}
        info["hooks"] = str(hooks_dir) if hooks_dir else info.get("hooks")
        repo_id = identity.read_id(Path(key))
        if repo_id is not None:
            info["id"] = repo_id
        repos[key] = info
    return new


def follow(common_dir: str | Path, path: Path | None = None) -> str | None:
    """Move the entry of a repository moved to ``common_dir`` (see :func:`moved_from`) to its
    new path; returns the old path, or None when there was nothing to move."""
    key = str(Path(common_dir).resolve())
    with _locked(path or registry_path()) as repos:
        old = moved_from(key, repos)
        if old is None or key in repos:
            if old is not None:
                repos.pop(old)
            return old
        info = repos.pop(old)
        info["hooks"] = _moved_hooks(info.get("hooks"), old, key)
        repos[key] = info
    return old


def prune(path: Path | None = None) -> list[dict[str, str | None]]:
    """Fix the entries whose git dir no longer holds their repository: one moved (its id's
    data folder records a git dir that exists and holds the id) is moved there, one gone is
    dropped. Returns ``[{"repo": OLD, "moved_to": NEW or None}]`` (None: dropped)."""
    changes: list[dict[str, str | None]] = []
    root = config.data_root()
    with _locked(path or registry_path()) as repos:
        for old, info in sorted(repos.items()):
            repo_id = info.get("id") if isinstance(info.get("id"), str) else None
            if holds(old, repo_id):
                if repo_id is None and identity.read_id(Path(old)) is not None:
                    info["id"] = identity.read_id(Path(old))  # an entry from before ids were recorded
                continue
            folder = identity.find_folder(root, repo_id) if repo_id else None
            new = identity.recorded(folder) if folder is not None else None
            target = str(new) if new is not None and str(new) != old and holds(new, repo_id) else None
            del repos[old]
            if target is not None and target not in repos:
                info["hooks"] = _moved_hooks(info.get("hooks"), old, target)
                repos[target] = info
            changes.append({"repo": old, "moved_to": target})
    return changes


def remove(common_dir: str | Path, path: Path | None = None) -> bool:
    """Unregister a repository; returns False when it was not registered."""
    key = str(Path(common_dir).resolve())
    with _locked(path or registry_path()) as repos:
        return repos.pop(key, None) is not None
