"""structlog set-up.

The CLI (:func:`configure_when_used`, ``cli=True``): a record at the level asked for (warning;
``-v`` info, ``-vv`` debug) is one line on stderr in the house's form, as the CLI's own
errors are (``gitrag: warning: the message (key=value, ...)``, the fields whose value the
message does not already spell); every record from info up (debug with ``-vv``) also goes,
timestamped with all its fields, to the log file :func:`log_file` (``<state dir>/gitrag.log``,
kept below LOG_MAX_BYTES by moving it to ``gitrag.log.1``). A log file that cannot be written
(a read-only state folder) is skipped in silence: a log never fails a command.

The daemon (``gitrag daemon``): structlog's own lines on stderr (the journal under systemd,
``daemon.log`` when started in the background), JSON under systemd.
"""

from __future__ import annotations

import importlib.machinery
import os
import sys
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

LOG_NAME = "gitrag.log"
LOG_MAX_BYTES = 1_000_000  # then the file moves to gitrag.log.1 (one old file kept)
_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}


def log_file() -> Path:
    """Where the CLI's log records go: ``gitrag.log`` in the state folder (``gitrag.config.state_dir``)."""
    from gitrag import config

    return config.state_dir() / LOG_NAME


def configure(level: str = "warning", json_lines: bool | None = None, cli: bool = False) -> None:
    """Route gitrag's logs at ``level``: for the CLI (``cli``) as the module says, else to stderr,
    JSON when ``json_lines`` (default: under systemd)."""
    import logging

    import structlog

    level_no = getattr(logging, os.environ.get("GITRAG_LOG_LEVEL", level).upper(), logging.WARNING)
    if cli:
        structlog.configure(
            processors=[structlog.processors.add_log_level, structlog.processors.TimeStamper(fmt="iso"),
                        structlog.processors.format_exc_info, _CliSink(level_no)],
            wrapper_class=structlog.make_filtering_bound_logger(min(level_no, logging.INFO)),
            logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
            cache_logger_on_first_use=False,
        )
        return
    if json_lines is None:
        json_lines = bool(os.environ.get("INVOCATION_ID") or os.environ.get("JOURNAL_STREAM"))
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


def one_line(level: str, event: str, fields: dict[str, Any]) -> str:
    """``gitrag: warning: event (key=value, ...)``: the house's one line for a log record, its
    fields after the message except those whose value the message already holds (a file's path
    the message names). Newlines in values are escaped, so it stays one line."""
    extra = [f"{key}={value}" for key, value in fields.items() if str(value) not in event]
    text = f"gitrag: {level}: {event}" + (f" ({', '.join(extra)})" if extra else "")
    return text.replace("\r", "\\r").replace("\n", "\\n")


class _CliSink:
    """The last structlog processor of the CLI: writes the record (see the module) and drops it."""

    def __init__(self, shown: int) -> None:
        self.shown = shown

    def __call__(self, _logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> Any:
        import structlog

        record = dict(event_dict)
        level = str(record.pop("level", "info"))
        stamp = str(record.pop("timestamp", ""))
        event = str(record.pop("event", ""))
        if _LEVELS.get(level, 30) >= self.shown:
            try:
                sys.stderr.write(one_line(level, event, record) + "\n")
                sys.stderr.flush()
            except (OSError, ValueError):  # a closed stderr: the log file still has it
                pass
        _append(f"{stamp} [{level}] {event}" + "".join(f" {k}={v!r}" for k, v in record.items()) + "\n")
        raise structlog.DropEvent


def _append(text: str) -> None:
    """Add ``text`` to :func:`log_file` (0600, in a 0700 folder), moving a full file aside first;
    nothing when it cannot be written."""
    from gitrag import config
    from gitrag.errors import GitragError

    try:
        path = log_file()
        config.private_mkdir(path.parent)
        try:
            if os.stat(path).st_size > LOG_MAX_BYTES:
                os.replace(path, path.with_name(LOG_NAME + ".1"))
        except FileNotFoundError:
            pass
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, text.encode("utf-8", "backslashreplace"))
        finally:
            os.close(fd)
    except (OSError, GitragError):
        pass


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
            configure(level, cli=True)

        loader.exec_module = exec_then_configure  # type: ignore[method-assign]  # wraps this one module's loader
        return spec


def configure_when_used(level: str = "warning") -> None:
    """:func:`configure` for the CLI now if structlog is already imported, else the moment
    something imports it (before any of its loggers can write): a command that never logs
    (``ask`` through the daemon) never pays for importing structlog (~150 ms with rich)."""
    if "structlog" in sys.modules:
        configure(level, cli=True)
        return
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _ConfigureOnImport)]
    sys.meta_path.insert(0, _ConfigureOnImport(level))
