"""Bring back the daemon of an installed repository when a command finds none running.

``gitrag install`` promises a daemon that keeps the index current; when it died (killed,
crashed, a reboot without the systemd service), the hooks' events wait in the spool and
every answer lags. ``ask`` and ``mcp`` then start it again the way install does: the
systemd user service when gitrag's unit is installed and a user manager answers (so it
stays a service), else a detached background process (gitrag.daemon.launch). The hook
path never does this: it must stay standard-library only and never wait for a start.

A repository that was never installed gets no daemon (the command answers in-process).
``GITRAG_AUTOSTART=0`` turns this off (the command answers in-process and says how to
start the daemon).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from gitrag.daemon import launch, registry
from gitrag.daemon import systemd as unit
from gitrag.errors import GitragError

START_WAIT_S = 30.0


def wanted(common_dir: Path) -> bool:
    """Whether a daemon should run for the repository whose git dir is ``common_dir``: it is
    registered (installed) and ``GITRAG_AUTOSTART`` is not ``0``. Never raises (a registry
    that cannot be read: False)."""
    if os.environ.get("GITRAG_AUTOSTART", "").strip().lower() in ("0", "no", "false", "off"):
        return False
    try:
        return registry.is_registered(common_dir)
    except Exception:  # noqa: BLE001 - an unreadable registry: answer in-process, as before
        return False


def _unit_installed() -> bool:
    path = unit.unit_path()
    try:
        return unit.MARK in path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


def start() -> tuple[int, str]:
    """Start the daemon as install would and wait until it answers: ``(pid, how)`` with
    ``how`` ``"systemd"`` or ``"background"``. A systemd unit that does not come up falls back
    to a background process. Raises GitragError (one line, naming the log) when none starts."""
    if _unit_installed() and unit.available():
        proc = subprocess.run(["systemctl", "--user", "start", unit.UNIT], capture_output=True, check=False)
        if proc.returncode == 0:
            pid = launch.wait_running(START_WAIT_S)
            if pid is not None:
                return pid, "systemd"
    try:
        return launch.ensure_running(START_WAIT_S), "background"
    except OSError as exc:  # a state folder that cannot be written, an interpreter gone
        raise GitragError(f"could not start the gitrag daemon: {exc}") from None


def started_line(pid: int, how: str) -> str:
    """What a command prints after :func:`start`: one line, what was done and where it logs."""
    if how == "systemd":
        return f"the gitrag daemon was not running: started it (pid {pid}) under systemd ({unit.UNIT})"
    return f"the gitrag daemon was not running: started it in the background (pid {pid}; log {launch.log_path()})"
