"""Which repositories the daemon keeps current. Standard library only.

``<state dir>/repos.json``: ``{"version": 1, "repos": {COMMON_DIR: {"added": EPOCH_S,
"hooks": HOOKS_DIR}}}``, keyed by the resolved common git dir (one entry serves the main
work tree and every linked worktree). ``gitrag install`` adds, ``gitrag uninstall``
removes; the notifier drops events of repositories not listed (a shared or global
``core.hooksPath`` fires for every repository), and the daemon reconciles each listed one.
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

from gitrag import config


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
    return str(Path(common_dir).resolve()) in load(path)


@contextmanager
def _locked(path: Path) -> Iterator[dict[str, dict[str, Any]]]:
    config.private_mkdir(path.parent)
    with open(str(path) + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        repos = load(path)
        yield repos
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
        repos[key] = info
    return new


def remove(common_dir: str | Path, path: Path | None = None) -> bool:
    """Unregister a repository; returns False when it was not registered."""
    key = str(Path(common_dir).resolve())
    with _locked(path or registry_path()) as repos:
        return repos.pop(key, None) is not None
