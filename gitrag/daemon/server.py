"""The daemon's transport: an asyncio unix-socket server, one JSON object per line.

Each connection may send several requests, one line each, answered in order; a line
must arrive whole within READ_TIMEOUT_S (a stalled client is told so and dropped). A peer
of another uid (SO_PEERCRED) is refused. ``op`` names a ``cmd_<op>`` coroutine of the
handler; its result is the reply's ``result``. Every failure is a reply, never a dropped
connection: bad JSON or version, unknown op, bad arguments (the signature, then the types
and ranges of :data:`gitrag.daemon.protocol.ARGS`; exit code 2), a GitragError
(its kind and exit code), a bug (kind ``InternalError``, exit code 3, with the traceback;
the daemon logs it and keeps serving).
"""

from __future__ import annotations

import asyncio
import errno
import inspect
import os
import socket
import struct
import time
import traceback
from functools import partial
from pathlib import Path
from typing import Any

import structlog

from gitrag.daemon import protocol
from gitrag.errors import GitragError
from gitrag.errors import SocketInUse as SocketInUse  # defined there, named here too

log = structlog.get_logger("gitrag.daemon")
READ_TIMEOUT_S = 60.0  # for each request line: a client that stalls longer (slow loris) is dropped


def peer_uid(sock: socket.socket | None) -> int | None:
    """The connecting process's uid (Linux SO_PEERCRED); None where it cannot be known."""
    if sock is None or not hasattr(socket, "SO_PEERCRED"):
        return None
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[1])


def clear_stale(path: Path) -> bool:
    """Remove a socket file left by a crashed daemon; returns True if one was removed.

    Raises SocketInUse when something accepts connections on it."""
    if not os.path.lexists(path):
        return False
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(os.fspath(path))
    except OSError as exc:
        if exc.errno not in (errno.ECONNREFUSED, errno.ENOENT, errno.ENOTSOCK):
            raise
    else:
        raise SocketInUse(f"a gitrag daemon already listens on {path}; stop it with `gitrag daemon --stop`")
    finally:
        probe.close()
    path.unlink(missing_ok=True)
    return True


async def serve(handler: object, path: Path) -> asyncio.AbstractServer:
    """Listen on ``path`` (mode 0600, in a 0700 folder), replacing a stale socket file."""
    protocol.private_dir(path.parent)
    if clear_stale(path):
        log.warning("replaced a stale socket", socket=str(path))
    old_umask = os.umask(0o177)
    try:
        server = await asyncio.start_unix_server(partial(_connection, handler), path=os.fspath(path),
                                                 limit=protocol.MAX_MESSAGE)
    finally:
        os.umask(old_umask)
    os.chmod(path, 0o600)
    return server


async def _connection(handler: object, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        uid = peer_uid(writer.get_extra_info("socket"))
        if uid is not None and uid != os.getuid():
            log.warning("refused a peer of another user", uid=uid)
            await _send(writer, protocol.failure(f"uid {uid} may not use this daemon", "PermissionDenied"))
            return
        while True:
            try:
                line = await asyncio.wait_for(reader.readline(), READ_TIMEOUT_S)
            except ValueError:  # longer than MAX_MESSAGE
                too_long = f"request exceeds {protocol.MAX_MESSAGE} bytes"
                await _send(writer, protocol.failure(too_long, "ProtocolError", 2))
                return
            except TimeoutError:
                stalled = f"no complete request line within {READ_TIMEOUT_S:g} s; closing"
                await _send(writer, protocol.failure(stalled, "ProtocolError", 2))
                return
            if not line:
                return
            await _send(writer, await dispatch(handler, line))
    except (ConnectionError, BrokenPipeError):
        pass
    finally:
        writer.close()


async def _send(writer: asyncio.StreamWriter, reply: dict[str, Any]) -> None:
    try:
        data = protocol.encode(reply)
    except protocol.ProtocolError as exc:
        data = protocol.encode(protocol.failure(str(exc), "ProtocolError"))
    writer.write(data)
    await writer.drain()


async def dispatch(handler: object, line: bytes) -> dict[str, Any]:
    """One request line -> one reply message (see the module doc for the failures)."""
    try:
        message = protocol.decode(line)
    except protocol.ProtocolError as exc:
        return protocol.failure(str(exc), "ProtocolError", 2)
    op, args = message.get("op"), message.get("args") or {}
    if op != "ping" and hasattr(handler, "last_request"):  # a daemon with nothing registered leaves when unused
        handler.last_request = time.monotonic()
    fn = getattr(handler, f"cmd_{op}", None) if isinstance(op, str) and op.isidentifier() else None
    if fn is None:
        known = sorted(n[4:] for n in dir(handler) if n.startswith("cmd_"))
        return protocol.failure(f"unknown op {op!r}; known: {', '.join(known)}", "UnknownOp", 2)
    try:
        if not isinstance(args, dict):
            raise TypeError("args must be a JSON object")
        inspect.signature(fn).bind(**args)
        protocol.check_args(args)
    except (TypeError, protocol.BadArguments) as exc:
        return protocol.failure(f"bad arguments for {op!r}: {exc}", "BadArguments", 2)
    try:
        return protocol.success(await fn(**args))
    except GitragError as exc:
        return protocol.failure(str(exc), type(exc).__name__, exc.exit_code)
    except Exception as exc:
        log.exception("command crashed", op=op)
        return protocol.failure(f"internal error in {op!r}: {exc!r}", "InternalError", 3,
                                traceback=traceback.format_exc())
