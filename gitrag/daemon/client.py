"""Talking to the daemon from the CLI and the notifier. Standard library only.

Before anything is sent, the socket is checked (:func:`check_socket_files`, then the
listening process's uid by SO_PEERCRED): a socket another user could have planted is
refused with :class:`UntrustedSocket`. The other failures are told apart (like
pywatchman): :class:`ConnectError` (no daemon listens: work in-process instead),
:class:`Timeout` (a daemon took the request but did not answer in time) and
:class:`CommandError` (the daemon ran the command and it failed; it carries the daemon's
error kind and exit code). All are GitragErrors, so the
CLI maps them to exit codes like any other.
"""

from __future__ import annotations

import os
import socket
import stat
import struct
import time
from pathlib import Path
from typing import Any

from gitrag.daemon import protocol
from gitrag.errors import CommandError as CommandError  # defined there, named here too
from gitrag.errors import ConnectError as ConnectError
from gitrag.errors import DaemonError as DaemonError
from gitrag.errors import Timeout as Timeout
from gitrag.errors import UntrustedSocket as UntrustedSocket

_WHAT_TO_DO = ("someone else may be posing as your gitrag daemon; nothing was sent. Remove it (as its owner or "
               "root), or set XDG_RUNTIME_DIR or GITRAG_HOME to a private folder")


def check_socket_files(path: Path) -> None:
    """Refuse a socket whose folder or file another user could have made: the folder must
    be a real folder of ours without group/other bits (0700), the socket ours and 0600.
    Raises ConnectError when there is no socket (no daemon), UntrustedSocket otherwise."""
    uid = os.getuid()
    try:
        folder = os.lstat(path.parent)
    except (FileNotFoundError, NotADirectoryError):
        raise ConnectError(f"no gitrag daemon listens on {path} (no folder); start one: `gitrag daemon`") from None
    except OSError as exc:
        raise ConnectError(f"cannot reach the gitrag daemon's socket {path}: {exc.strerror}") from None
    why = protocol.unsafe_folder(path.parent, folder)  # first: another user's 0700 folder hides its socket
    if why is not None:
        raise UntrustedSocket(f"refusing the gitrag socket folder {path.parent}: {why}; {_WHAT_TO_DO}")
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        raise ConnectError(f"no gitrag daemon listens on {path} (no socket); start one: `gitrag daemon`") from None
    except OSError as exc:
        raise ConnectError(f"cannot reach the gitrag daemon's socket {path}: {exc.strerror}") from None
    if not stat.S_ISSOCK(st.st_mode):
        raise ConnectError(f"no gitrag daemon listens on {path} (not a socket); start one: `gitrag daemon`")
    if st.st_uid != uid or stat.S_IMODE(st.st_mode) & 0o077:
        raise UntrustedSocket(f"refusing the gitrag socket {path}: it belongs to uid {st.st_uid} with mode "
                              f"{stat.S_IMODE(st.st_mode):04o} (yours is uid {uid}, 0600); {_WHAT_TO_DO}")


def _peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process that listens on the other end (SO_PEERCRED), None off Linux."""
    if not hasattr(socket, "SO_PEERCRED"):
        return None
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[1])


def listener_pid(path: Path | None = None) -> int | None:
    """The pid of the process listening on the daemon's socket (SO_PEERCRED of a connection,
    checked as every connection is: ours, the files private), whether or not it answers: a
    daemon stopped with SIGSTOP still accepts. None when none listens, off Linux, or the
    socket is refused as untrusted."""
    try:
        sock = _connect(path or protocol.socket_path(), 2.0)
    except DaemonError:
        return None
    try:
        if not hasattr(socket, "SO_PEERCRED"):
            return None
        pid = int(struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))[0])
        return pid if pid > 0 else None
    finally:
        sock.close()


def _connect(path: Path, timeout: float | None) -> socket.socket:
    """A connection to the daemon at ``path``, checked before anything is sent: the files
    (:func:`check_socket_files`) and the listening process's uid (SO_PEERCRED)."""
    check_socket_files(path)
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
    peer = _peer_uid(sock)
    if peer is not None and peer != os.getuid():
        sock.close()
        raise UntrustedSocket(f"refusing the process listening on {path}: it runs as uid {peer}, not as you "
                              f"(uid {os.getuid()}); {_WHAT_TO_DO}")
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
    """``{"running": bool, "pid": int | None, "socket": str, "version", "build"}``: whether a
    daemon answers a ping; with ``"error"`` (one line) when the socket was refused as
    untrusted, ``"stuck": true`` when a daemon accepted but did not answer in ``timeout`` (then
    ``pid`` is the listening process's, None when it cannot be read)."""
    path = protocol.socket_path()
    try:
        info = request("ping", timeout=timeout, socket_path=path)
    except UntrustedSocket as exc:
        return {"running": False, "pid": None, "socket": str(path), "error": str(exc)}
    except Timeout:  # accepted, no answer: stopped (SIGSTOP), suspended, wedged
        return {"running": False, "pid": listener_pid(path), "socket": str(path), "stuck": True}
    except DaemonError:
        return {"running": False, "pid": None, "socket": str(path)}
    return {"running": True, "pid": info.get("pid"), "socket": str(path), "version": info.get("version"),
            "build": info.get("build")}
