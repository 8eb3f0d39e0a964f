"""Everything gitrag writes to the user: JSON for programs, rich text for people.

Human output goes to stdout; progress and messages go to stderr so ``--json`` output
stays clean to pipe. Progress is a bar on a terminal and plain lines elsewhere
(:mod:`gitrag.progress`).

rich is imported on first use of ``out`` or ``err`` (or a progress bar), not with this
module: the lines of ``gitrag ask`` (:func:`line`), JSON and :func:`info` are written
without it, so a client command pays no ~80 ms of rich import.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from gitrag import progress

_consoles: dict[str, Any] = {}
_STYLES = {"bold": "1", "dim": "2", "yellow": "33"}


def __getattr__(name: str) -> Any:
    """``out`` (stdout) and ``err`` (stderr): rich Consoles, made on first use."""
    if name not in ("out", "err"):
        raise AttributeError(name)
    if name not in _consoles:
        from rich.console import Console

        _consoles[name] = Console(stderr=name == "err", highlight=False, soft_wrap=True)
    return _consoles[name]


def _styled(stream: Any) -> bool:
    """Whether ``stream`` gets ANSI bold/dim: a terminal (or FORCE_COLOR), not TERM=dumb, as rich decides."""
    if os.environ.get("FORCE_COLOR"):
        return True
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        return False
    return tty and os.environ.get("TERM", "") != "dumb"


def line(*parts: str | tuple[str, str]) -> None:
    """One line on stdout from plain ``parts`` and ``(text, style)`` ones (style ``bold``,
    ``dim`` or ``yellow``): ANSI-styled on a terminal, plain elsewhere; the text is written as it is (no
    markup, no emoji codes), with ``\\uXXXX``-style escapes for what stdout cannot encode."""
    styled = _styled(sys.stdout)
    text = "".join(p if isinstance(p, str) else (f"\x1b[{_STYLES[p[1]]}m{p[0]}\x1b[0m" if styled else p[0])
                   for p in parts) + "\n"
    try:  # a closed pipe (`gitrag ask ... | head`) is handled once for all output (gitrag.surfaces.streams)
        sys.stdout.write(text)
    except UnicodeEncodeError:
        encoding = sys.stdout.encoding or "utf-8"
        sys.stdout.write(text.encode(encoding, "backslashreplace").decode(encoding, "replace"))


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
    """``gitrag: error: message`` on stderr; the message is text, never markup (a fix such as
    ``pip install 'gitrag[transformer]'`` must print as written)."""
    from rich.markup import escape

    __getattr__("err").print(f"[bold red]gitrag: error:[/] {escape(message)}", markup=True, highlight=False)


def info(message: str) -> None:
    """``message`` as one plain line on stderr."""
    try:
        sys.stderr.write(message + "\n")
    except UnicodeEncodeError:
        sys.stderr.write(message.encode("ascii", "backslashreplace").decode("ascii") + "\n")
    sys.stderr.flush()


@contextmanager
def progress_bar(enabled: bool, label: str = "indexing") -> Iterator[Any]:
    """Yields a ``(stage, done, total)`` callback for :class:`gitrag.index.indexer.Indexer`.

    On a terminal it draws a bar when ``enabled`` (commands pass ``not --json``; a stage whose
    total is not known yet, ``progress.UNKNOWN``, pulses with its count so far). Anywhere
    else (a pipe, a file, CI) it writes a plain line to stderr every few seconds whatever
    ``enabled`` is, ``gitrag: {label}: embedding chunks 1,200/4,300, 28%, 41 s``
    (:mod:`gitrag.progress`; ``GITRAG_PROGRESS_INTERVAL=off`` silences it). Nothing ever
    goes to stdout, so ``--json`` output stays one clean document.
    """
    err = __getattr__("err")
    if not err.is_terminal:
        yield progress.Lines(label, _write_line, progress.interval())
        return
    if not enabled:
        yield lambda stage, done, total: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description:<18}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=True) as bar:
        tasks: dict[str, Any] = {}

        def update(stage: str, done: int, total: int) -> None:
            known = total if total >= 0 else None  # progress.UNKNOWN: a pulsing bar and the count, no fake end
            if stage not in tasks:
                tasks[stage] = bar.add_task(progress.STAGES.get(stage, stage), total=known)
            bar.update(tasks[stage], completed=done, total=known)

        yield update


def _write_line(line: str, _fields: dict[str, Any]) -> None:
    sys.stderr.write(f"gitrag: {line}\n")
    sys.stderr.flush()
