"""stdout and stderr made safe to write anything to: any character (backslash escapes where
the encoding cannot hold it) and a closed pipe (the rest of the output dropped, the command
finishing its work). Set up once by :func:`gitrag.surfaces.entry.main`, before any command runs.
"""

from __future__ import annotations

import os
import sys
from typing import Any


def tolerant_streams() -> None:
    """Let stdout and stderr print any text: a character their encoding cannot hold
    (``PYTHONIOENCODING=ascii``, a C locale, a path's undecodable byte) is written as a
    backslash escape (``\\xe8``) instead of crashing the command. JSON output escapes it
    as JSON does instead (``gitrag.surfaces.output.emit_json``)."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and getattr(stream, "errors", "strict") == "strict":
            reconfigure(errors="backslashreplace")


class _ClosedPipeSafe:
    """A text stream (stdout, stderr) on which writing to a closed pipe never raises: the
    first write or flush that meets the closed pipe (``gitrag install 2>&1 | head -1``)
    points the file descriptor at /dev/null, and that output and all that follows is
    dropped, so the command finishes its work and exits with its own code. Every other
    attribute is the stream's own."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return int(self._stream.write(text))
        except BrokenPipeError:
            self._drop()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._drop()

    def _drop(self) -> None:
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
            self._stream.flush()  # what was buffered: now into /dev/null
        except (OSError, ValueError):
            pass

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)


def pipe_safe_streams() -> None:
    """Wrap stdout and stderr in :class:`_ClosedPipeSafe` (the one place a closed pipe is
    handled: no command is cut short by a reader that went away), and flush them before
    the interpreter's own last flush, which would otherwise report the closed pipe."""
    import atexit

    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, _ClosedPipeSafe):
            setattr(sys, name, _ClosedPipeSafe(stream))
    atexit.register(lambda: [getattr(sys, n).flush() for n in ("stdout", "stderr")
                             if isinstance(getattr(sys, n), _ClosedPipeSafe)])
