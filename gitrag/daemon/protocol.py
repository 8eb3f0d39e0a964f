"""The wire format between gitrag's clients and its daemon. Standard library only.

One JSON object per line (UTF-8, ``\\n``-terminated), at most :data:`MAX_MESSAGE` bytes:

    request   {"v": 1, "op": "ask", "args": {"repo": "/src/x", "question": "..."}}
    success   {"v": 1, "ok": true, "result": <any JSON>}
    failure   {"v": 1, "ok": false, "error": "one line", "kind": "NotIndexed", "exit_code": 1}

Errors cross the socket as data, never as a dropped connection. A message of another
version ``v`` is refused with a failure saying which version the daemon speaks.

Arguments are checked against one table, :data:`ARGS` (type and range of every field by
name), before an op runs; a bad one is a ``BadArguments`` failure, never a traceback.

Files: the socket and the lock live in :func:`gitrag.config.runtime_dir` (0700). A unix
socket path is limited to 107 bytes; when the folder is too deep (a long ``GITRAG_HOME``)
the socket moves to ``/tmp/gitrag-<uid>/<12 hex of the folder>.sock``.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from gitrag import config
from gitrag.errors import BadArguments as BadArguments  # defined there, named here too
from gitrag.errors import ProtocolError as ProtocolError
from gitrag.errors import UnsafeFolder as UnsafeFolder
from gitrag.query.results import MAX_K

VERSION = 1
MAX_MESSAGE = 8 * 1024 * 1024  # bytes in one line, newline included
MAX_SOCKET_PATH = 107  # bytes: sun_path is 108 with its NUL


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


class EventFields(TypedDict, total=False):
    """A hook event's fields past ``repo`` and ``branch`` (the ``notify`` op's args, also what
    the spool keeps): the repository's common git dir, the hook's name and arguments, when it
    ran (Unix time, s), and all the branches it named when there were several."""

    common_dir: str
    hook: str
    args: list[str]
    time: float
    branches: list[str]


class HookEvent(EventFields):
    """One hook event as gitrag.daemon.notify.event builds it: the work tree (``repo``) and,
    when the hook said, the (first) branch it happened on."""

    repo: str
    branch: NotRequired[str]


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
    import hashlib  # only for a long runtime folder: not on every client's start-up

    digest = hashlib.sha256(os.fsencode(folder)).hexdigest()[:12]
    return Path(f"/tmp/gitrag-{os.getuid()}") / f"{digest}.sock"


def unsafe_folder(path: Path, st: os.stat_result) -> str | None:
    """Why ``path`` (lstat ``st``) may not hold our socket, or None when it is a folder of
    this user that no one else may enter (no group or other bits)."""
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a folder" + (" (a symlink)" if stat.S_ISLNK(st.st_mode) else "")
    if st.st_uid != os.getuid():
        return f"it belongs to uid {st.st_uid}, not to you (uid {os.getuid()})"
    if stat.S_IMODE(st.st_mode) & 0o077:
        return f"its mode is {stat.S_IMODE(st.st_mode):04o}, not 0700"
    return None


def private_dir(path: Path) -> Path:
    """Create ``path`` (0700, with its missing parents) if needed and make sure it is ours
    and private (a mode other than 0700 is corrected).

    Raises UnsafeFolder when it is a symlink, not a folder, or owned by another user (a
    shared /tmp must not let anyone else plant our socket)."""
    config.private_mkdir(path)
    st = os.lstat(path)
    why = unsafe_folder(path, st)
    if why is not None and (not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid()):
        raise UnsafeFolder(f"refusing the gitrag socket folder {path}: {why}; someone else may be posing as "
                           f"your daemon: remove it (as its owner or root), or set XDG_RUNTIME_DIR or GITRAG_HOME "
                           f"to a private folder")
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(path, 0o700)
    return path


# -- request arguments ----------------------------------------------------------------------


@dataclass(frozen=True)
class Arg:
    """What one request argument may be: its JSON type(s), a range for numbers, the
    choices or the longest length for strings, the item type for lists."""

    kind: type | tuple[type, ...]
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    max_len: int | None = None
    items: type | None = None
    nonblank: bool = False


MAX_PATH_ARG = 4096  # characters
# characters in a question (``gitrag ask -`` reads one from stdin, past a command line's
# 128 KiB): even at 12 bytes a character escaped in JSON it fits a MAX_MESSAGE line
MAX_QUESTION = 500_000
# Every argument any op takes, by name (the same name means the same thing in every op).
# The limits are the CLI's (``gitrag ask -k`` 1-MAX_K, ``--expand`` 0-3). A new field: one line.
ARGS: dict[str, Arg] = {
    "repo": Arg(str, max_len=MAX_PATH_ARG, nonblank=True),
    "question": Arg(str, max_len=MAX_QUESTION, nonblank=True),
    "k": Arg(int, 1, MAX_K),
    "mode": Arg(str, choices=("hybrid", "dense", "sparse")),
    "path": Arg(str, max_len=MAX_PATH_ARG),
    "lang": Arg(str, max_len=64),
    "no_answer": Arg(bool),
    "expand": Arg(int, 0, 3),
    "rebuild": Arg(bool),
    "settings": Arg(dict),
    "common_dir": Arg(str, max_len=MAX_PATH_ARG),
    "hook": Arg(str, max_len=64),
    "branch": Arg(str, max_len=MAX_PATH_ARG, nonblank=True),  # notify: the branch the hook ran on
    "args": Arg(list, max_len=64, items=str),
    "time": Arg((int, float)),
    "exclude": Arg(list, max_len=256, items=str),
    "files": Arg(bool),
    "worktree": Arg(bool),  # ask, related: search the work tree too (gitrag.query.worktree)
    "offset": Arg(int, 0, 10_000),
    "rev": Arg(str, max_len=1024),  # ask: a revision (gitrag.query.revisions)
    "location": Arg(str, max_len=MAX_PATH_ARG + 16, nonblank=True),  # related: PATH:LINE
}


def check_args(args: dict[str, Any]) -> None:
    """Raise BadArguments (one line) unless every argument named in :data:`ARGS` has its
    type and range; arguments not in the table are left to the op's signature."""
    for name, value in args.items():
        spec = ARGS.get(name)
        if spec is not None:
            _check(name, value, spec)


def _check(name: str, value: Any, spec: Arg) -> None:
    kinds: tuple[type[Any], ...] = spec.kind if isinstance(spec.kind, tuple) else (spec.kind,)
    if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
        wanted = " or ".join(_JSON_NAMES.get(k, k.__name__) for k in kinds)
        raise BadArguments(f"{name!r} must be {wanted}, not {_JSON_NAMES.get(type(value), type(value).__name__)} "
                           f"{_short(value)}")
    if spec.low is not None and value < spec.low or spec.high is not None and value > spec.high:
        raise BadArguments(f"{name!r} must be between {spec.low:g} and {spec.high:g}, not {_short(value)}")
    if spec.choices and value not in spec.choices:
        raise BadArguments(f"{name!r} must be one of {', '.join(spec.choices)}, not {_short(value)}")
    if spec.max_len is not None and len(value) > spec.max_len:
        raise BadArguments(f"{name!r} is too long ({len(value)}; at most {spec.max_len})")
    if spec.nonblank and not value.strip():
        raise BadArguments(f"{name!r} is empty")
    if isinstance(value, str) and "\0" in value:
        raise BadArguments(f"{name!r} may not contain NUL characters")
    if spec.items is not None and not all(isinstance(v, spec.items) and not isinstance(v, bool) for v in value):
        raise BadArguments(f"every item of {name!r} must be {_JSON_NAMES.get(spec.items, spec.items.__name__)}")


_JSON_NAMES: dict[type, str] = {str: "a string", int: "an integer", float: "a number", bool: "true or false",
                                list: "an array", dict: "an object", type(None): "null"}


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:37] + "..."
