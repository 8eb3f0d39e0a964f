"""Whether the daemon on the socket is one to talk to: the check before every routed command.

One ``ping`` with a short timeout (:data:`PING_TIMEOUT_S`) before a command goes to the
daemon, so that

- no daemon (no socket, refused): the command works in-process (:func:`check` -> None);
- a daemon that accepts but does not answer (stopped with SIGSTOP, a laptop suspended in
  the middle of a sync, a wedged process) costs a few seconds, then one line
  (:class:`DaemonStuck`), instead of the 300 s an ``ask`` may wait for a cold model;
- a daemon of another gitrag (version or build, :mod:`gitrag.build`; one from before the
  handshake sends no build) is refused in one line naming both (:class:`DaemonVersion`),
  instead of failing on an argument it does not know; ``gitrag install`` restarts it.
"""

from __future__ import annotations

from typing import Any

from gitrag.daemon import client
from gitrag.errors import DaemonStuck as DaemonStuck  # defined there, named here too
from gitrag.errors import DaemonVersion as DaemonVersion

PING_TIMEOUT_S = 3.0


def _pid_hint() -> str:
    pid = stuck_pid()
    return f" (pid {pid})" if pid is not None else ""


def stuck_pid() -> int | None:
    """The pid of the daemon on the socket: the listening process's (SO_PEERCRED), else the one
    its lock file names; None when neither says."""
    from gitrag.daemon import protocol

    pid = client.listener_pid()
    if pid is not None:
        return pid
    try:
        text = protocol.lock_path().read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def stuck_advice(pid: int | None) -> str:
    """What to do about a daemon that accepts but does not answer (one clause, for a line)."""
    who = str(pid) if pid is not None else "PID"
    return (f"resume it (`kill -CONT {who}`) or stop it (`gitrag daemon --stop`: SIGTERM, then SIGKILL if it "
            f"does not exit)")


def check(timeout: float = PING_TIMEOUT_S) -> dict[str, Any] | None:
    """The daemon's ping info when one runs that this gitrag may talk to; None when none runs.
    Raises DaemonStuck, DaemonVersion, UntrustedSocket."""
    from gitrag import build

    try:
        info = client.request("ping", timeout=timeout)
    except client.ConnectError:
        return None
    except client.Timeout:
        pid = stuck_pid()
        named = f" (pid {pid})" if pid is not None else ""
        raise DaemonStuck(f"the gitrag daemon{named} accepted the connection but did not answer within {timeout:g} s "
                          f"(stopped or suspended?): {stuck_advice(pid)}") from None
    if not isinstance(info, dict):
        raise DaemonVersion("the process on the gitrag socket answered a ping with no gitrag reply")
    if not build.same(info):
        theirs = f"{info.get('version', '?')} (build {info.get('build') or 'from before builds were named'})"
        raise DaemonVersion(f"the running gitrag daemon{_pid_hint()} is gitrag {theirs}, this is gitrag "
                            f"{build.describe()}: restart it (`gitrag daemon --stop`, then `gitrag install` or "
                            f"`gitrag daemon`)")
    return info
