"""structlog set-up: human lines on stderr for the CLI, JSON lines for the daemon under systemd."""

from __future__ import annotations

import importlib.machinery
import os
import sys
from typing import Any


def configure(level: str = "warning", json_lines: bool | None = None) -> None:
    """Route gitrag's logs to stderr at ``level``; JSON when ``json_lines`` (default: under systemd)."""
    import logging

    import structlog

    if json_lines is None:
        json_lines = bool(os.environ.get("INVOCATION_ID") or os.environ.get("JOURNAL_STREAM"))
    level_no = getattr(logging, os.environ.get("GITRAG_LOG_LEVEL", level).upper(), logging.WARNING)
    renderer = structlog.processors.JSONRenderer() if json_lines else structlog.dev.ConsoleRenderer(colors=False)
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level_no),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


class _ConfigureOnImport:  # a sys.meta_path finder (not importlib.abc's: that import costs ~15 ms)
    """Configures structlog right after it is first imported (see :func:`configure_when_used`)."""

    def __init__(self, level: str) -> None:
        self.level = level

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "structlog":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        loader, level = spec.loader, self.level
        exec_module = loader.exec_module

        def exec_then_configure(module: Any) -> None:
            exec_module(module)
            configure(level)

        loader.exec_module = exec_then_configure  # type: ignore[method-assign]  # wraps this one module's loader
        return spec


def configure_when_used(level: str = "warning") -> None:
    """:func:`configure` now if structlog is already imported, else the moment something
    imports it (before any of its loggers can write): a command that never logs (``ask``
    through the daemon) never pays for importing structlog (~150 ms with rich)."""
    if "structlog" in sys.modules:
        configure(level)
        return
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _ConfigureOnImport)]
    sys.meta_path.insert(0, _ConfigureOnImport(level))
