"""Everything gitrag writes to the user: JSON for programs, rich text for people.

Human output goes to stdout; progress bars and messages go to stderr so ``--json`` output
stays clean to pipe.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=None) + "\n")
    sys.stdout.flush()


def error(message: str) -> None:
    err.print(f"[bold red]gitrag: error:[/] {message}", markup=True, highlight=False)


def info(message: str) -> None:
    err.print(message, markup=False)


_STAGES = {"chunk": "chunking files", "embed": "embedding chunks", "store": "writing points", "restore": "restoring points"}


@contextmanager
def progress_bar(enabled: bool) -> Iterator[Any]:
    """Yields a ``(stage, done, total)`` callback; draws a bar on a terminal, nothing otherwise."""
    if not enabled or not err.is_terminal:
        yield lambda stage, done, total: None
        return
    columns = (TextColumn("{task.description:<18}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=True) as bar:
        tasks: dict[str, Any] = {}

        def update(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(_STAGES.get(stage, stage), total=total)
            bar.update(tasks[stage], completed=done, total=total)

        yield update
