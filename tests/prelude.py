"""Faults injected into a real gitrag subprocess, from the outside (gitrag has no test hooks).

    python -c "import tests.prelude as p; p.main()" index --json      # like `gitrag index --json`

reads ``RELIABILITY_PRELUDE`` (JSON) before handing over to ``gitrag.surfaces.entry.main``:

``{"kill": [["gitrag.index.store.edge:EdgeStore.upsert", 2, "after"]]}``
    SIGKILL this process on the 2nd call of that method, before or after it runs.
``{"sleep": [["gitrag.index.embedders.hashing:HashEmbedder.embed_documents", 0.05]]}``
    sleep that long before every call (a slow model).
``{"set": [["gitrag.index.indexer", "UPSERT_BATCH", 8]]}``
    set a module attribute (``Class.attr`` works too).
``{"offline": "/path/attempts.jsonl"}``
    every connection or name lookup that is not a unix socket or loopback raises
    OSError(ENETUNREACH) and is appended to that file.

The process is started with ``PYTHONPATH`` holding the project root, so ``tests`` imports.
"""

from __future__ import annotations

import errno
import functools
import importlib
import json
import os
import signal
import socket
import sys
import threading
import time
from typing import Any

ENV = "RELIABILITY_PRELUDE"
_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}


def _resolve(target: str) -> tuple[Any, str]:
    """``"pkg.mod:Class.method"`` -> (owner object, attribute name)."""
    module_name, _, attr_path = target.partition(":")
    owner: Any = importlib.import_module(module_name)
    *parents, name = attr_path.split(".")
    for part in parents:
        owner = getattr(owner, part)
    return owner, name


def _kill_on(target: str, nth: int, when: str) -> None:
    owner, name = _resolve(target)
    original = getattr(owner, name)
    calls = [0]
    lock = threading.Lock()

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with lock:
            calls[0] += 1
            hit = calls[0] == nth
        if hit and when == "before":
            os.kill(os.getpid(), signal.SIGKILL)
        result = original(*args, **kwargs)
        if hit:
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    setattr(owner, name, wrapper)


def _slow(target: str, seconds: float) -> None:
    owner, name = _resolve(target)
    original = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        time.sleep(seconds)
        return original(*args, **kwargs)

    setattr(owner, name, wrapper)


def _set(module_name: str, attr_path: str, value: Any) -> None:
    owner, name = _resolve(f"{module_name}:{attr_path}")
    setattr(owner, name, value)


def is_local(host: Any) -> bool:
    """A loopback address or name (what the offline promise allows)."""
    text = str(host).strip("[]").lower()
    return text in _LOOPBACK_NAMES or text.startswith("127.") or text in ("::1", "0:0:0:0:0:0:0:1")


def _offline(log_path: str) -> None:
    """Make every non-loopback, non-unix connection and name lookup fail, and log it."""
    lock = threading.Lock()

    def refuse(kind: str, target: Any) -> OSError:
        with lock, open(log_path, "a") as fh:
            fh.write(json.dumps({"kind": kind, "target": repr(target)}) + "\n")
        return OSError(errno.ENETUNREACH, f"offline test: {kind} to {target!r} refused")

    def guard(original: Any, kind: str) -> Any:
        @functools.wraps(original)
        def connect(self: socket.socket, address: Any, *args: Any) -> Any:
            if self.family != socket.AF_UNIX and not is_local(address[0]):
                raise refuse(kind, address)
            return original(self, address, *args)

        return connect

    socket.socket.connect = guard(socket.socket.connect, "connect")
    socket.socket.connect_ex = guard(socket.socket.connect_ex, "connect_ex")
    real_getaddrinfo = socket.getaddrinfo

    @functools.wraps(real_getaddrinfo)
    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host is not None and not is_local(host if isinstance(host, str) else host.decode()):
            refuse("lookup", host)
            raise socket.gaierror(socket.EAI_NONAME, f"offline test: lookup of {host!r} refused")
        return real_getaddrinfo(host, *args, **kwargs)

    socket.getaddrinfo = getaddrinfo


def install(spec: dict[str, Any]) -> None:
    if spec.get("offline"):
        _offline(spec["offline"])
    for module_name, attr_path, value in spec.get("set", []):
        _set(module_name, attr_path, value)
    for target, seconds in spec.get("sleep", []):
        _slow(target, float(seconds))
    for target, nth, when in spec.get("kill", []):
        _kill_on(target, int(nth), when)


def main() -> None:
    install(json.loads(os.environ.get(ENV) or "{}"))
    sys.argv[0] = "gitrag"
    from gitrag.surfaces.entry import main as gitrag_main

    gitrag_main()
