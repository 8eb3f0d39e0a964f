"""Talking to the daemon from the CLI and the notifier. Standard library only.

Three failures are told apart (like pywatchman): :class:`ConnectError` (no daemon
listens: work in-process instead), :class:`Timeout` (a daemon took the request but did
not answer in time) and :class:`CommandError` (the daemon ran the command and it
failed; it carries the daemon's error kind and exit code). All are GitragErrors, so the
CLI maps them to exit codes like any other.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any

from gitrag.daemon import protocol
from gitrag.errors import GitragError


class DaemonError(GitragError):
    """Base of every failure to get an answer from the daemon."""


class ConnectError(DaemonError):
    """No daemon listens on the socket (missing, refused, or not a socket)."""


class Timeout(DaemonError):
    """Connected, but no complete reply within the timeout."""


class CommandError(DaemonError):
    """The daemon answered ``ok: false``; ``kind`` is its exception class name."""

    def __init__(self, message: str, kind: str = "Error", exit_code: int = 1) -> None:
        super().__init__(message)
        self.kind = kind
        self.exit_code = exit_code


def _connect(path: Path, timeout: float | None) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(os.fspath(path))
    except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError) as exc:
        sock.close()
        raise ConnectError(f"no gitrag daemon listens on {path} ({exc.strerror}); start one: `gitrag daemon`") from None
    except OSError as exc:
        sock.close()
        raise ConnectError(f"cannot connect to the gitrag daemon at {path}: {exc}") from None
    return sock


def _read_line(sock: socket.socket, deadline: float | None) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        if deadline is not None:
            sock.settimeout(max(deadline - time.monotonic(), 0.001))
        data = sock.recv(65536)
        if not data:
            raise DaemonError("the gitrag daemon closed the connection without answering; see its log")
        chunks.append(data)
        size += len(data)
        if b"\n" in data:
            return b"".join(chunks).split(b"\n", 1)[0]
        if size > protocol.MAX_MESSAGE:
            raise DaemonError(f"the daemon's reply exceeds {protocol.MAX_MESSAGE} bytes")


def request(op: str, /, *, timeout: float | None = 30.0, socket_path: Path | None = None, **args: Any) -> Any:
    """Send ``{"op": op, "args": args}`` and return the daemon's ``result``.

    ``timeout``: seconds for connect, send and the whole reply; None waits forever.
    ``socket_path``: default :func:`protocol.socket_path`. (``args`` may hold any other
    name, ``path`` included.) Raises ConnectError, Timeout, CommandError, or DaemonError
    for a broken reply."""
    path = socket_path or protocol.socket_path()
    deadline = None if timeout is None else time.monotonic() + timeout
    sock = _connect(path, timeout)
    try:
        sock.sendall(protocol.encode(protocol.request(op, args)))
        line = _read_line(sock, deadline)
    except TimeoutError:
        raise Timeout(f"the gitrag daemon did not answer {op!r} within {timeout:g} s") from None
    except (BrokenPipeError, ConnectionResetError) as exc:
        raise DaemonError(f"the gitrag daemon dropped the connection: {exc}") from None
    finally:
        sock.close()
    try:
        reply = protocol.decode(line)
    except protocol.ProtocolError as exc:
        raise DaemonError(f"unreadable reply from the gitrag daemon: {exc}") from None
    if not reply.get("ok"):
        raise CommandError(str(reply.get("error")), str(reply.get("kind", "Error")), int(reply.get("exit_code", 1)))
    return reply.get("result")


def probe(timeout: float = 2.0) -> dict[str, Any]:
    """``{"running": bool, "pid": int | None, "socket": str}``: whether a daemon answers a ping."""
    path = protocol.socket_path()
    try:
        info = request("ping", timeout=timeout, socket_path=path)
    except DaemonError:
        return {"running": False, "pid": None, "socket": str(path)}
    return {"running": True, "pid": info.get("pid"), "socket": str(path), "version": info.get("version")}
