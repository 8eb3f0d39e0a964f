"""The wire format between gitrag's clients and its daemon. Standard library only.

One JSON object per line (UTF-8, ``\\n``-terminated), at most :data:`MAX_MESSAGE` bytes:

    request   {"v": 1, "op": "ask", "args": {"repo": "/src/x", "question": "..."}}
    success   {"v": 1, "ok": true, "result": <any JSON>}
    failure   {"v": 1, "ok": false, "error": "one line", "kind": "NotIndexed", "exit_code": 1}

Errors cross the socket as data, never as a dropped connection. A message of another
version ``v`` is refused with a failure saying which version the daemon speaks.

Files: the socket and the lock live in :func:`gitrag.config.runtime_dir` (0700). A unix
socket path is limited to 107 bytes; when the folder is too deep (a long ``GITRAG_HOME``)
the socket moves to ``/tmp/gitrag-<uid>/<12 hex of the folder>.sock``.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

from gitrag import config

VERSION = 1
MAX_MESSAGE = 8 * 1024 * 1024  # bytes in one line, newline included
MAX_SOCKET_PATH = 107  # bytes: sun_path is 108 with its NUL


class ProtocolError(Exception):
    """A line that is not one JSON object of this protocol version, or is too long."""


def encode(message: dict[str, Any]) -> bytes:
    """``message`` as one line of compact UTF-8 JSON. Raises ProtocolError above MAX_MESSAGE."""
    data = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
    if len(data) > MAX_MESSAGE:
        raise ProtocolError(f"message of {len(data)} bytes exceeds the {MAX_MESSAGE}-byte limit")
    return data


def decode(line: bytes) -> dict[str, Any]:
    """One received line as a dict. Raises ProtocolError for bad JSON, a non-object or a wrong ``v``."""
    try:
        message = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"not a JSON line: {exc}") from None
    except RecursionError:  # deeply nested arrays or objects
        raise ProtocolError("not a JSON line: nested too deeply") from None
    if not isinstance(message, dict):
        raise ProtocolError("a message must be a JSON object")
    if message.get("v") != VERSION or isinstance(message.get("v"), bool):
        raise ProtocolError(f"protocol version {message.get('v')!r} is not supported; this side speaks v{VERSION}")
    return message


def request(op: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"v": VERSION, "op": op, "args": args}


def success(result: Any) -> dict[str, Any]:
    return {"v": VERSION, "ok": True, "result": result}


def failure(error: str, kind: str = "Error", exit_code: int = 1, **extra: Any) -> dict[str, Any]:
    return {"v": VERSION, "ok": False, "error": error, "kind": kind, "exit_code": exit_code, **extra}


# -- where things live ----------------------------------------------------------------------


def lock_path() -> Path:
    """The daemon's lock file (holds its pid); whoever holds its flock is the daemon."""
    return config.runtime_dir() / "daemon.lock"


def socket_path() -> Path:
    """The daemon's socket: ``<runtime dir>/daemon.sock``, or a short fallback under /tmp."""
    folder = config.runtime_dir()
    path = folder / "daemon.sock"
    if len(os.fsencode(path)) <= MAX_SOCKET_PATH:
        return path
    digest = hashlib.sha256(os.fsencode(folder)).hexdigest()[:12]
    return Path(f"/tmp/gitrag-{os.getuid()}") / f"{digest}.sock"


def private_dir(path: Path) -> Path:
    """Create ``path`` (0700) if needed and make sure it is ours and private.

    Raises PermissionError when it is a symlink, not a folder, or owned by another user
    (a shared /tmp must not let anyone else plant our socket)."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise PermissionError(f"{path} is not a folder owned by uid {os.getuid()}; remove it and retry")
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(path, 0o700)
    return path
