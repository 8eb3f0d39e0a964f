"""The event spool: hook events written while no daemon answered. Standard library only.

``<state dir>/spool.jsonl`` holds one JSON event per line. :func:`append` (the notifier)
and :func:`drain` (the daemon, at start and on every reconcile) take an exclusive
``flock`` on the file, so an event is either drained or still in the file, never half
of each. Unreadable lines are dropped on drain (a crash mid-write cannot wedge it).
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gitrag import config

MAX_EVENTS = 10_000  # a drained spool never yields more (oldest dropped: reconcile repairs)


def spool_path() -> Path:
    return config.state_dir() / "spool.jsonl"


def _open(path: Path) -> int:
    config.private_mkdir(path.parent)
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)


def append(event: Mapping[str, Any], path: Path | None = None) -> None:
    """Add one event (a JSON object) at the end of the spool, durably (fsync). Raises OSError."""
    path = path or spool_path()
    line = json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
    fd = _open(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)  # closing releases the lock


def drain(path: Path | None = None) -> list[dict[str, Any]]:
    """Every spooled event, oldest first, and empty the spool. Missing spool: []."""
    path = path or spool_path()
    if not path.exists():
        return []
    fd = _open(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with os.fdopen(os.dup(fd), "rb") as fh:
            fh.seek(0)
            raw = fh.read()
        os.ftruncate(fd, 0)
        os.fsync(fd)
    finally:
        os.close(fd)
    events = []
    for line in raw.splitlines():
        try:
            event = json.loads(line)
        except (UnicodeDecodeError, json.JSONDecodeError):
            continue
        if isinstance(event, dict):
            events.append(event)
    return events[-MAX_EVENTS:]


def pending(path: Path | None = None) -> int:
    """Events waiting in the spool (lines), without draining it."""
    path = path or spool_path()
    try:
        with path.open("rb") as fh:
            return sum(1 for _ in fh)
    except FileNotFoundError:
        return 0
