"""Which gitrag this process runs: ``__version__`` plus a build id of its source files.

Two processes of one version number can run different code (an upgrade that kept the
number, an editable install being worked on); the daemon and its clients compare both in
the handshake (:mod:`gitrag.daemon.handshake`). The build id checksums each module's path,
size and mtime under the package folder (about 1 ms; computed once per process).
Standard library only.
"""

from __future__ import annotations

import functools
import os
import zlib
from pathlib import Path

from gitrag import __version__


@functools.lru_cache(maxsize=1)
def build_id() -> str:
    """12 hex digits naming this installation's code."""
    root = Path(__file__).resolve().parent
    listing = __version__.encode() + b"".join(
        f"{'/'.join(parts)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode("utf-8", "surrogateescape")
        for parts, st in sorted(_modules(os.fspath(root), ())))
    # CRC-32 and Adler-32 side by side: 48 bits that change with any listed file, without
    # loading OpenSSL's hashlib (~4 ms of every client's start-up); not a security check
    return f"{zlib.crc32(listing):08x}{zlib.adler32(listing):08x}"[:12]


def _modules(folder: str, parts: tuple[str, ...]) -> list[tuple[tuple[str, ...], os.stat_result]]:
    """(path parts below the package folder, stat) of every ``*.py`` below ``folder``, symbolic
    links to folders not followed (as ``Path.rglob``); ``os.scandir`` rather than pathlib:
    this runs in every client command that talks to the daemon (~1 ms instead of ~4)."""
    found = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                found += _modules(entry.path, (*parts, entry.name))
            elif entry.name.endswith(".py"):
                found.append(((*parts, entry.name), entry.stat()))
        except OSError:
            continue
    return found


def describe() -> str:
    """``0.1.0 (build 1a2b3c4d5e6f)``."""
    return f"{__version__} (build {build_id()})"


def same(info: dict[str, object]) -> bool:
    """Whether a daemon's ping (``version``, ``build``) names this very code."""
    return info.get("version") == __version__ and info.get("build") == build_id()

