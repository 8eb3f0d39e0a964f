"""Starting and stopping a daemon process from the CLI (without systemd)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

from gitrag import config
from gitrag.daemon import client, protocol
from gitrag.errors import GitragError
from gitrag.git.hookenv import no_git_env


def log_path() -> Path:
    return config.state_dir() / "daemon.log"


def lock_held() -> bool:
    """Whether a daemon process holds the daemon lock (it does from its start to its very end)."""
    try:
        fh = open(protocol.lock_path())  # noqa: SIM115 - closed below
    except OSError:
        return False
    try:
        fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        fh.close()  # releases the shared lock at once
    return False


def _gone(pid: int) -> bool:
    """Whether process ``pid`` has exited (no such process, or a zombie nobody reaped yet)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return False


def wait_running(wait_s: float, proc: subprocess.Popen[bytes] | None = None) -> int | None:
    """Poll until a daemon answers; its pid, or None after ``wait_s`` seconds or when ``proc``
    exited and no other daemon is starting (one started at the same moment by another
    client won the lock: that one is waited for)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        info = client.probe(timeout=1.0)
        if info["running"]:
            return int(info["pid"])
        if info.get("error"):
            raise client.UntrustedSocket(info["error"])
        if proc is not None and proc.poll() is not None and not lock_held():
            return None
        time.sleep(0.05)
    return None


def ensure_running(wait_s: float = 60.0) -> int:
    """The pid of the running daemon, started now (:func:`spawn`) if none answers; safe when
    several clients (MCP servers) do this at once: one daemon wins, all use it."""
    info = client.probe(timeout=1.0)
    if info["running"]:
        return int(info["pid"])
    if info.get("error"):
        raise client.UntrustedSocket(info["error"])
    return spawn(wait_s)


def spawn(wait_s: float = 30.0) -> int:
    """Start ``python -m gitrag daemon`` detached (own session, stdin closed, output appended
    to :func:`log_path`) and wait until it answers; returns its pid. Raises GitragError with
    the log's last lines when it does not come up."""
    log = log_path()
    config.private_mkdir(log.parent)
    with log.open("ab") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "gitrag", "daemon"], stdin=subprocess.DEVNULL, stdout=fh,
                                stderr=fh, start_new_session=True, close_fds=True, cwd="/", env=no_git_env())
    pid = wait_running(wait_s, proc)
    if pid is None:
        tail = " | ".join(log.read_text(errors="replace").strip().splitlines()[-3:])
        raise GitragError(f"the gitrag daemon did not start (see {log}): {tail}")
    return pid


STUCK_GRACE_S = 10.0  # seconds a daemon that did not answer has to exit on SIGTERM before SIGKILL


def stop_unanswering(pid: int, grace_s: float = STUCK_GRACE_S) -> str:
    """Stop the daemon ``pid`` that accepts but does not answer (SIGSTOP'd, wedged): SIGTERM and
    SIGCONT (a stopped process handles the SIGTERM once continued: it stops as on ``--stop``),
    then SIGKILL if it has not exited within ``grace_s`` seconds. Returns the signal that ended
    it (``"SIGTERM"`` / ``"SIGKILL"``); raises GitragError when it cannot be signalled (not
    this user's) or is still there after SIGKILL. A sync it was in is redone from its journal."""
    import signal

    def signalled(sig: signal.Signals) -> None:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
        except PermissionError:
            raise GitragError(f"cannot signal the gitrag daemon (pid {pid}): it is not yours") from None

    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 30.0)):
        signalled(sig)
        signalled(signal.SIGCONT)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if _gone(pid) and not lock_held():
                return sig.name
            time.sleep(0.05)
    raise GitragError(f"the gitrag daemon (pid {pid}) is still there after SIGKILL; see `ps {pid}`")


def stop(wait_s: float = 120.0) -> int | None:
    """Ask the running daemon to stop and wait until it is gone (its lock released, i.e. its
    syncs finished and its files closed, and its process exited); its pid, or None if none ran.
    Raises GitragError when it is still running after ``wait_s`` seconds."""
    try:
        reply = client.request("stop", timeout=5.0)
    except client.ConnectError:
        return None
    pid = reply.get("pid")
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:  # it stops listening at once, then finishes its syncs and exits
        if not client.probe(timeout=1.0)["running"] and not lock_held() and (pid is None or _gone(int(pid))):
            return int(pid) if pid is not None else None
        time.sleep(0.05)
    raise GitragError(f"the gitrag daemon (pid {pid}) did not stop within {wait_s:g} s; see its log, or `kill {pid}`")
