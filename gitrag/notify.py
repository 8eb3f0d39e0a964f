"""The entry point installed git hooks run: ``<python> -P -m gitrag.notify HOOK ARGS``.

Its module path is written into every hook ``gitrag install`` has ever written, so it
stays here while the code lives in :mod:`gitrag.daemon.notify` (standard library only,
as the hook path must be; tests/test_hooks.py checks it).
"""

from __future__ import annotations

import sys

from gitrag.daemon.notify import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
