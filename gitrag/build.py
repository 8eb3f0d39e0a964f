"""Which gitrag this process runs: ``__version__`` plus a build id of its source files.

Two processes of one version number can run different code (an upgrade that kept the
number, an editable install being worked on); the daemon and its clients compare both in
the handshake (:mod:`gitrag.daemon.handshake`). The build id hashes each module's path,
size and mtime under the package folder (about 1 ms; computed once per process).
Standard library only.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from gitrag import __version__


@functools.lru_cache(maxsize=1)
def build_id() -> str:
    """12 hex digits naming this installation's code."""
    root = Path(__file__).resolve().parent
    digest = hashlib.sha256(__version__.encode())
    for path in sorted(root.rglob("*.py")):
        try:
            st = path.stat()
        except OSError:
            continue
        digest.update(f"{path.relative_to(root)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()[:12]


def describe() -> str:
    """``0.1.0 (build 1a2b3c4d5e6f)``."""
    return f"{__version__} (build {build_id()})"


def same(info: dict[str, object]) -> bool:
    """Whether a daemon's ping (``version``, ``build``) names this very code."""
    return info.get("version") == __version__ and info.get("build") == build_id()

