"""Everything gitrag writes to the user: JSON for programs, rich text for people.

Human output goes to stdout; progress and messages go to stderr so ``--json`` output
stays clean to pipe. Progress is a bar on a terminal and plain lines elsewhere
(:mod:`gitrag.progress`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from gitrag import progress

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def emit_json(data: Any) -> None:
    """Write ``data`` as one line of JSON on stdout: UTF-8 text as it is, or, where stdout's
    encoding cannot hold some character (``PYTHONIOENCODING=ascii``), ``\\uXXXX`` escapes."""
    text = json.dumps(data, ensure_ascii=False, indent=None)
    try:
        text.encode(sys.stdout.encoding or "utf-8")
    except (UnicodeEncodeError, LookupError):
        text = json.dumps(data, ensure_ascii=True, indent=None)
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def error(message: str) -> None:
    err.print(f"[bold red]gitrag: error:[/] {message}", markup=True, highlight=False)


def info(message: str) -> None:
    err.print(message, markup=False)


@contextmanager
def progress_bar(enabled: bool, label: str = "indexing") -> Iterator[Any]:
    """Yields a ``(stage, done, total)`` callback for :class:`gitrag.indexer.Indexer`.

    On a terminal it draws a bar when ``enabled`` (commands pass ``not --json``). Anywhere
    else (a pipe, a file, CI) it writes a plain line to stderr every few seconds whatever
    ``enabled`` is, ``gitrag: {label}: embedding chunks 1,200/4,300, 28%, 41 s``
    (:mod:`gitrag.progress`; ``GITRAG_PROGRESS_INTERVAL=off`` silences it). Nothing ever
    goes to stdout, so ``--json`` output stays one clean document.
    """
    if not err.is_terminal:
        yield progress.Lines(label, _write_line, progress.interval())
        return
    if not enabled:
        yield lambda stage, done, total: None
        return
    columns = (TextColumn("{task.description:<18}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=True) as bar:
        tasks: dict[str, Any] = {}

        def update(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(progress.STAGES.get(stage, stage), total=total)
            bar.update(tasks[stage], completed=done, total=total)

        yield update


def _write_line(line: str, _fields: dict[str, Any]) -> None:
    sys.stderr.write(f"gitrag: {line}\n")
    sys.stderr.flush()
