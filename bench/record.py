"""The results format of ``bench/results/<topic>.json``: load and check a file, write one.

BENCHMARKS.md is rendered from these files (``bench/render_benchmarks.py``); the format is
described field by field in bench/results/README.md. A bench script writes its figures
with ``record.write(path, title=..., ...)`` (``--record FILE`` on the scripts that have it).

    load(path) -> dict          the checked contents; ResultsError (one line) if malformed
    problems(data) -> [str]     what is wrong with a loaded JSON value ([] when it is valid)
    write(path, **fields)       check the fields and write them (indented, keys in order)
    command_line() -> str       how this process was started, as a results "commands" entry
    key_values, by_row, side_by_side, printed: tables from what a script printed (JSON or text)

Standard library only: a bench script imports it with ``import record`` (bench/ is the
script's folder) and a test with ``from bench import record``.
"""

from __future__ import annotations

import contextlib
import datetime
import io
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"

#: The sections of BENCHMARKS.md, in order: (subject, heading).
SUBJECTS: list[tuple[str, str]] = [
    ("retrieval", "Retrieval quality"),
    ("localization", "Localization on real issues"),
    ("indexing", "Indexing and scale"),
    ("storage", "Storage"),
    ("queries", "Queries"),
    ("hooks", "Hooks and freshness"),
    ("history", "Work-tree overlay, revisions and history"),
    ("integrity", "Integrity"),
    ("team", "Team server"),
    ("other", "Other figures"),
]
#: A file without a "subject" goes where its file name says (a topic another issue's work measured),
#: else where its issue's work belongs (the issues of the tracker).
NAME_SUBJECT: dict[str, str] = {"scale-disk": "storage", "integrity-cost": "integrity", "overlay": "history"}
ISSUE_SUBJECT: dict[int, str] = {
    2: "indexing", 3: "indexing", 4: "indexing", 5: "hooks", 6: "retrieval", 7: "queries",
    11: "retrieval", 12: "indexing", 15: "storage", 20: "localization", 21: "indexing",
    22: "hooks", 23: "integrity", 24: "history", 25: "team",
}

REQUIRED = ("title", "issue", "commands", "measured")
OPTIONAL = ("text", "tables", "notes", "subject", "order")
MEASURED = ("date", "commit", "machine")
TABLE = ("caption", "columns", "rows")
TABLE_OPTIONAL = ("digits",)


class ResultsError(ValueError):
    """A results file that cannot be read or does not follow the format; str() is one line."""


def subject_of(data: dict[str, Any], name: str = "") -> str:
    """The subject a checked results file (named ``name``, e.g. "scale-disk.json") belongs to: its
    "subject" field, else its name's (``NAME_SUBJECT``), else its issue's (``ISSUE_SUBJECT``; the
    first listed issue of a list that has one), else "other"."""
    if "subject" in data:
        return str(data["subject"])
    if Path(name).stem in NAME_SUBJECT:
        return NAME_SUBJECT[Path(name).stem]
    issues = data["issue"] if isinstance(data["issue"], list) else [data["issue"]]
    return next((ISSUE_SUBJECT[i] for i in issues if i in ISSUE_SUBJECT), "other")


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) and v.strip() for v in value)


def _cell(value: Any) -> bool:
    return value is None or (isinstance(value, (str, int, float)) and not isinstance(value, bool))


def _table_problems(table: Any, where: str) -> list[str]:
    if not isinstance(table, dict):
        return [f"{where} is not an object"]
    out = [f"{where} has no {k!r}" for k in TABLE if k not in table]
    out += [f"{where} has an unknown field {k!r}" for k in table if k not in TABLE + TABLE_OPTIONAL]
    if out:
        return out
    if not isinstance(table["caption"], str):
        out.append(f"{where}.caption is not a string")
    columns = table["columns"]
    if not isinstance(columns, list) or not columns or not all(isinstance(c, str) for c in columns):
        return out + [f"{where}.columns is not a non-empty list of strings (a column's name may be empty)"]
    rows = table["rows"]
    if not isinstance(rows, list) or not rows:
        return out + [f"{where}.rows is not a non-empty list"]
    for i, row in enumerate(rows):
        if not isinstance(row, list):
            out.append(f"{where}.rows[{i}] is not a list")
        elif len(row) != len(columns):
            out.append(f"{where}.rows[{i}] has {len(row)} cells for {len(columns)} columns")
        elif not all(_cell(c) for c in row):
            out.append(f"{where}.rows[{i}] holds a cell that is not a string, number or null")
    digits = table.get("digits")
    if digits is not None and not (
            (isinstance(digits, int) and not isinstance(digits, bool) and 0 <= digits <= 9)
            or (isinstance(digits, list) and len(digits) == len(columns)
                and all(d is None or (isinstance(d, int) and 0 <= d <= 9) for d in digits))):
        out.append(f"{where}.digits is not 0-9 or a list of 0-9/null, one per column")
    return out


def problems(data: Any) -> list[str]:
    """Every way ``data`` (a loaded JSON value) departs from the format; [] when it follows it."""
    if not isinstance(data, dict):
        return ["the file does not hold a JSON object"]
    out = [f"no {k!r} field" for k in REQUIRED if k not in data]
    out += [f"unknown field {k!r} (the format's fields: {', '.join(REQUIRED + OPTIONAL)})"
            for k in data if k not in REQUIRED + OPTIONAL]
    if out:
        return out
    if not isinstance(data["title"], str) or not data["title"].strip():
        out.append("'title' is not a non-empty string")
    issue = data["issue"]
    issues = issue if isinstance(issue, list) else [issue]
    if not issues or not all(isinstance(i, int) and not isinstance(i, bool) and i > 0 for i in issues):
        out.append("'issue' is not an issue number (or a list of them)")
    if not _strings(data["commands"]) or not data["commands"]:
        out.append("'commands' is not a non-empty list of command lines")
    measured = data["measured"]
    if not isinstance(measured, dict):
        out.append("'measured' is not an object")
    else:
        out += [f"'measured' has an unknown field {k!r} (its fields: {', '.join(MEASURED)})"
                for k in measured if k not in MEASURED]
        if not isinstance(measured.get("machine"), str) or not measured["machine"].strip():
            out.append("'measured.machine' is missing (say the cores and the load, e.g. '2 cores, shared, load 8-15')")
        out += [f"'measured.{k}' is not a string" for k in ("date", "commit")
                if k in measured and not isinstance(measured[k], str)]
    if "text" in data and not isinstance(data["text"], str):
        out.append("'text' is not a string")
    if "notes" in data and not (isinstance(data["notes"], list) and all(isinstance(n, str) for n in data["notes"])):
        out.append("'notes' is not a list of strings")
    if "tables" in data:
        if not isinstance(data["tables"], list):
            out.append("'tables' is not a list")
        else:
            for i, table in enumerate(data["tables"]):
                out += _table_problems(table, f"tables[{i}]")
    if "subject" in data and data["subject"] not in dict(SUBJECTS):
        out.append(f"'subject' {data['subject']!r} is not one of {', '.join(dict(SUBJECTS))}")
    if "order" in data and (not isinstance(data["order"], int) or isinstance(data["order"], bool)):
        out.append("'order' is not an integer")
    return out


def load(path: Path) -> dict[str, Any]:
    """The contents of the results file ``path``, checked. Raises ResultsError naming the file
    and its first problem (and how many more) when it cannot be read or is malformed."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ResultsError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ResultsError(f"{path}: not JSON: {exc}") from exc
    found = problems(data)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise ResultsError(f"{path}: {found[0]}{more}")
    return dict(data)


def load_all(folder: Path = RESULTS) -> list[tuple[Path, dict[str, Any]]]:
    """Every ``*.json`` of ``folder`` (sorted by name), loaded and checked; ResultsError on the
    first malformed one."""
    return [(p, load(p)) for p in sorted(folder.glob("*.json"))]


def command_line() -> str:
    """This process's command line as a repository-relative ``python bench/...`` line."""
    script = Path(sys.argv[0]).resolve()
    try:
        shown = str(script.relative_to(ROOT))
    except ValueError:
        shown = script.name
    return shlex.join(["python", shown, *sys.argv[1:]])


def commit() -> str:
    """The short commit of the checkout (with ``+dirty`` when the work tree has changes), or ''."""
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return ""
    head = git("rev-parse", "--short", "HEAD")
    return head + ("+dirty" if head and git("status", "--porcelain", "--untracked-files=no") else "")


def machine() -> str:
    """The cores and the load average now, e.g. '2 cores, load 12.3' (the rest is for the author to add)."""
    try:
        load = f", load {os.getloadavg()[0]:.1f}"
    except OSError:
        load = ""
    return f"{os.cpu_count() or '?'} cores{load}"


def write(path: Path, *, title: str, issue: int | list[int], text: str = "",
          tables: list[dict[str, Any]] | None = None, notes: list[str] | None = None,
          commands: list[str] | None = None, measured: dict[str, str] | None = None,
          subject: str | None = None) -> dict[str, Any]:
    """Write a results file at ``path`` and return what was written. ``commands`` defaults to
    this process's command line; ``measured`` to today (UTC), the checkout's commit and the
    machine's cores and load. Raises ResultsError (nothing written) if the fields are malformed."""
    data: dict[str, Any] = {
        "title": title, "issue": issue,
        "commands": commands or [command_line()],
        "measured": measured or {"date": datetime.datetime.now(datetime.UTC).date().isoformat(),
                                 "commit": commit(), "machine": machine()},
    }
    if subject:
        data["subject"] = subject
    if text:
        data["text"] = text
    data["tables"] = tables or []
    if notes:
        data["notes"] = notes
    found = problems(data)
    if found:
        raise ResultsError(f"{path}: {found[0]}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(data), encoding="utf-8")
    return data


_FLAT_LIST = re.compile(r"\[\n([^\[\]{}]*?)\n\s*\]")


def dumps(data: dict[str, Any]) -> str:
    """``data`` as indented JSON with each list of plain values (a table's row, its columns, the
    commands; not long notes) on one line, so a changed figure is a one-line diff."""
    def one_line(m: re.Match[str]) -> str:
        items = [x.strip().removesuffix(",") for x in m.group(1).split("\n")]
        return "[" + ", ".join(items) + "]" if all(len(x) <= 200 for x in items) else m.group(0)

    return _FLAT_LIST.sub(one_line, json.dumps(data, indent=1, ensure_ascii=False)) + "\n"


def table(caption: str, columns: list[str], rows: list[list[Any]], digits: int | list[int | None] | None = None
          ) -> dict[str, Any]:
    """A table of the format (``digits``: decimals a float cell is shown with; one or per column)."""
    out: dict[str, Any] = {"caption": caption, "columns": columns, "rows": rows}
    if digits is not None:
        out["digits"] = digits
    return out


# -- tables from a bench script's JSON -------------------------------------------------------------


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    """A nested dict as {"a.b": leaf}; a list of numbers or strings becomes one "x / y / z" cell."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flat(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(value, list):
        return {prefix: " / ".join(str(v) for v in value)} if all(_cell(v) for v in value) else {}
    return {prefix: value if _cell(value) else str(value)}


def key_values(caption: str, mapping: dict[str, Any]) -> dict[str, Any]:
    """A two-column table (measure, value) of a (nested) dict a script printed as JSON."""
    return table(caption, ["measure", "value"], [[k, v] for k, v in _flat(mapping).items()])


def by_row(caption: str, rows: dict[str, dict[str, Any]], first: str, digits: int | None = None) -> dict[str, Any]:
    """A table with one row per key of ``rows`` and one column per (flattened) field, in the order
    first seen; a field a row lacks is null."""
    flat = {name: _flat(fields) for name, fields in rows.items()}
    columns: list[str] = []
    for fields in flat.values():
        columns += [c for c in fields if c not in columns]
    return table(caption, [first, *columns], [[name, *(fields.get(c) for c in columns)] for name, fields in flat.items()],
                 digits=None if digits is None else [None, *([digits] * len(columns))])


def side_by_side(caption: str, columns: dict[str, dict[str, Any]], first: str = "measure") -> dict[str, Any]:
    """A table with one column per key of ``columns`` (a tree, a run) and one row per (flattened) field."""
    flat = {name: _flat(fields) for name, fields in columns.items()}
    keys: list[str] = []
    for fields in flat.values():
        keys += [k for k in fields if k not in keys]
    return table(caption, [first, *flat], [[k, *(fields.get(k) for fields in flat.values())] for k in keys])


class _Tee(io.StringIO):
    """A text stream that keeps what is written to it and passes it on to the stream it wraps."""

    def __init__(self, out: Any) -> None:
        super().__init__()
        self._out = out

    def write(self, text: str) -> int:
        self._out.write(text)
        return super().write(text)

    def flush(self) -> None:
        self._out.flush()


@contextlib.contextmanager
def capture() -> Iterator[io.StringIO]:
    """Print as usual and keep a copy: for a script that reports in text (``printed`` makes its table)."""
    tee = _Tee(sys.stdout)
    with contextlib.redirect_stdout(tee):
        yield tee


def printed(caption: str, text: str) -> dict[str, Any]:
    """A table (part, figure) of a script's printed report: each indented line a figure of the part
    named by the unindented line above it; blank lines dropped."""
    rows: list[list[Any]] = []
    part = ""
    for line in text.splitlines():
        if not line.strip():
            continue
        if line[:1].isspace():
            rows.append([part, line.strip()])
        else:
            part = line.strip()
            rows.append([part, ""])
    rows = [r for i, r in enumerate(rows) if r[1] or i + 1 == len(rows) or rows[i + 1][0] != r[0]]
    return table(caption, ["part", "figure"], rows or [["", "(nothing printed)"]])
