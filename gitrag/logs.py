"""structlog set-up: human lines on stderr for the CLI, JSON lines for the daemon under systemd."""

from __future__ import annotations

import logging
import os
import sys

import structlog


def configure(level: str = "warning", json_lines: bool | None = None) -> None:
    """Route gitrag's logs to stderr at ``level``; JSON when ``json_lines`` (default: under systemd)."""
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
