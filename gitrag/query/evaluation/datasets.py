"""Question sets: the click-style JSONL and the semble benchmark JSON label files.

Both load into :class:`Question` objects holding :class:`Target` spans; a target without
a span (``start_line is None``) is file-level and is hit by any chunk of its file.
Formats are described in ``bench/eval/README.md`` (JSONL) and
``bench/eval/semble/README.md`` (semble, following upstream ``benchmarks/data.py``).
Malformed files raise :class:`DatasetError` naming the file and the line or query.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from gitrag.errors import DatasetError as DatasetError  # defined there, named here too

Format = Literal["click", "semble"]

#: The folder upstream semble indexes per repository (``benchmark_root`` in its
#: ``repos.json``), keyed by label file stem. Results outside it are distractors.
SEMBLE_ROOTS: dict[str, str] = {
    "fastapi": "fastapi/",
    "flask": "src/flask/",
    "requests": "src/requests/",
}


@dataclass(frozen=True)
class Target:
    """A labelled answer: ``path`` relative to the repository root, ``/``-separated.

    ``start_line``/``end_line`` are 1-based and inclusive, or both ``None`` for a
    file-level label. ``symbol`` is a human-readable name ("" when the file has none).
    """

    path: str
    start_line: int | None = None
    end_line: int | None = None
    symbol: str = ""

    @property
    def has_span(self) -> bool:
        return self.start_line is not None and self.end_line is not None


@dataclass(frozen=True)
class Question:
    """One query: ``kind`` is the JSONL ``kind`` or the semble ``category``."""

    id: str
    kind: str
    query: str
    targets: tuple[Target, ...]


@dataclass(frozen=True)
class Dataset:
    """A loaded question file. ``name`` is the file stem (or semble's ``repo`` key)."""

    name: str
    format: Format
    source: Path
    questions: tuple[Question, ...]

    @property
    def suffix_paths(self) -> bool:
        """True for semble: paths match when equal or one ends with ``/`` + the other."""
        return self.format == "semble"

    @property
    def scope(self) -> str | None:
        """The path prefix upstream indexes (``SEMBLE_ROOTS``), None for other sets."""
        return SEMBLE_ROOTS.get(self.name) if self.format == "semble" else None

    @property
    def headline(self) -> str:
        """The metric to read first: nDCG@10 for semble, Recall@10 otherwise."""
        return "ndcg@10" if self.format == "semble" else "recall@10"


def load_dataset(path: str | Path) -> Dataset:
    """Load ``*.jsonl`` as a click-style set and ``*.json`` as a semble label file."""
    source = Path(path)
    if source.suffix == ".jsonl":
        return Dataset(source.stem, "click", source, tuple(load_click_jsonl(source)))
    if source.suffix == ".json":
        name, questions = _load_semble(source)
        return Dataset(name, "semble", source, tuple(questions))
    raise DatasetError(f"{source}: unknown question file type; use .jsonl or semble .json")


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{path}: cannot read question file ({exc})") from exc


# --- click-style JSONL -------------------------------------------------------------


def load_click_jsonl(path: str | Path) -> list[Question]:
    """Questions of a JSONL file, one object per line (blank lines skipped).

    Schema: ``{"id", "kind", "query", "targets": [{"path", "symbol", "start_line",
    "end_line"}]}`` (``bench/eval/README.md``); a target without lines is file-level.
    """
    source = Path(path)
    questions: list[Question] = []
    seen: set[str] = set()
    for lineno, line in enumerate(_read_text(source).splitlines(), 1):
        if not line.strip():
            continue
        where = f"{source}:{lineno}"
        question = _click_question(_json_object(line, where), where)
        if question.id in seen:
            raise DatasetError(f"{where}: duplicate question id {question.id!r}")
        seen.add(question.id)
        questions.append(question)
    if not questions:
        raise DatasetError(f"{source}: no questions found")
    return questions


def _json_object(line: str, where: str) -> dict[str, Any]:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{where}: invalid JSON ({exc.msg})") from exc
    if not isinstance(obj, dict):
        raise DatasetError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    return obj


def _click_question(obj: dict[str, Any], where: str) -> Question:
    qid, kind, query = (_nonempty_str(obj, key, where) for key in ("id", "kind", "query"))
    raw_targets = obj.get("targets")
    if not isinstance(raw_targets, list) or not raw_targets:
        raise DatasetError(f"{where}: 'targets' must be a non-empty list")
    targets = tuple(_mapping_target(t, f"{where}: target {i}") for i, t in enumerate(raw_targets, 1))
    return Question(qid, kind, query, targets)


def _nonempty_str(obj: dict[str, Any], key: str, where: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value.strip():
        raise DatasetError(f"{where}: '{key}' must be a non-empty string")
    return value


# --- targets -------------------------------------------------------------------------


def _mapping_target(raw: object, where: str) -> Target:
    if not isinstance(raw, dict):
        raise DatasetError(f"{where}: expected an object with 'path', got {type(raw).__name__}")
    path = _nonempty_str(raw, "path", where)
    start = _line_number(raw.get("start_line"), "start_line", where)
    end = _line_number(raw.get("end_line"), "end_line", where)
    if (start is None) != (end is None):
        raise DatasetError(f"{where}: give both 'start_line' and 'end_line', or neither")
    if start is not None and end is not None and start > end:
        raise DatasetError(f"{where}: start_line {start} is after end_line {end}")
    symbol = raw.get("symbol", "")
    if not isinstance(symbol, str):
        raise DatasetError(f"{where}: 'symbol' must be a string")
    return Target(path, start, end, symbol)


def _line_number(value: object, key: str, where: str) -> int | None:
    """A 1-based line number; digit strings are accepted as upstream semble does."""
    if value is None:
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise DatasetError(f"{where}: '{key}' must be a positive integer, got {value!r}")
    return value


# --- semble JSON ----------------------------------------------------------------------


def infer_category(query: str) -> str:
    """semble's category for a query without one (upstream ``infer_category``).

    No space in the stripped query: ``symbol``; starting with ``how `` (case-insensitive,
    as upstream lowercases first): ``architecture``; anything else: ``semantic``.
    """
    if " " not in query.strip():
        return "symbol"
    return "architecture" if query.lower().startswith("how ") else "semantic"


def load_semble_json(path: str | Path) -> list[Question]:
    """Questions of one semble label file; targets are ``relevant + secondary``.

    Ids are ``<stem>-001`` onwards in file order; ``kind`` is the ``category`` (inferred
    when missing or not a string); ``seed``/``related`` are ignored.
    """
    return _load_semble(Path(path))[1]


def _load_semble(source: Path) -> tuple[str, list[Question]]:
    try:
        items = json.loads(_read_text(source))
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{source}:{exc.lineno}: invalid JSON ({exc.msg})") from exc
    if not isinstance(items, list) or not items:
        raise DatasetError(f"{source}: expected a non-empty JSON array of queries")
    questions = [
        _semble_question(item, f"{source}: query {i}", f"{source.stem}-{i:03d}")
        for i, item in enumerate(items, 1)
    ]
    repos = {item.get("repo", source.stem) for item in items}
    if len(repos) != 1:
        raise DatasetError(f"{source}: queries name several repos {sorted(repos)}; split the file")
    return str(repos.pop()), questions


def _semble_question(item: object, where: str, qid: str) -> Question:
    if not isinstance(item, dict):
        raise DatasetError(f"{where}: expected an object, got {type(item).__name__}")
    query = _nonempty_str(item, "query", where)
    targets: list[Target] = []
    for key in ("relevant", "secondary"):
        raw = item.get(key, [])
        if not isinstance(raw, list):
            raise DatasetError(f"{where}: '{key}' must be a list")
        targets += [_semble_target(t, f"{where}: {key}[{j}]") for j, t in enumerate(raw)]
    category = item.get("category")
    kind = category if isinstance(category, str) else infer_category(query)
    return Question(qid, kind, query, tuple(targets))


def _semble_target(raw: object, where: str) -> Target:
    if isinstance(raw, str):
        if not raw:
            raise DatasetError(f"{where}: empty path")
        return Target(raw)
    return _mapping_target(raw, where)
