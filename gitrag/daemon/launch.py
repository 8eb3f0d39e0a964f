"""Starting and stopping a daemon process from the CLI (without systemd)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from gitrag import config
from gitrag.daemon import client
from gitrag.errors import GitragError
from gitrag.notify import no_git_env


def log_path() -> Path:
    return config.state_dir() / "daemon.log"


def wait_running(wait_s: float, proc: subprocess.Popen[bytes] | None = None) -> int | None:
    """Poll until a daemon answers; its pid, or None after ``wait_s`` seconds or when ``proc`` exits."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        info = client.probe(timeout=1.0)
        if info["running"]:
            return int(info["pid"])
        if proc is not None and proc.poll() is not None:
            return None
        time.sleep(0.05)
    return None


def spawn(wait_s: float = 30.0) -> int:
    """Start ``python -m gitrag daemon`` detached (own session, stdin closed, output appended
    to :func:`log_path`) and wait until it answers; returns its pid. Raises GitragError with
    the log's last lines when it does not come up."""
    log = log_path()
    log.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with log.open("ab") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "gitrag", "daemon"], stdin=subprocess.DEVNULL, stdout=fh,
                                stderr=fh, start_new_session=True, close_fds=True, cwd="/", env=no_git_env())
    pid = wait_running(wait_s, proc)
    if pid is None:
        tail = " | ".join(log.read_text(errors="replace").strip().splitlines()[-3:])
        raise GitragError(f"the gitrag daemon did not start (see {log}): {tail}")
    return pid


def stop(wait_s: float = 120.0) -> int | None:
    """Ask the running daemon to stop and wait until it is gone; its pid, or None if none ran.
    Raises GitragError when it is still running after ``wait_s`` seconds."""
    try:
        reply = client.request("stop", timeout=5.0)
    except client.ConnectError:
        return None
    pid = reply.get("pid")
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if not client.probe(timeout=1.0)["running"]:
            return int(pid) if pid is not None else None
        time.sleep(0.05)
    raise GitragError(f"the gitrag daemon (pid {pid}) did not stop within {wait_s:g} s; see its log, or `kill {pid}`")
