"""One exception tree: every public exception class of gitrag is defined in gitrag/errors.py,
and the tree drawn in its docstring is the classes' own (so the drawing cannot drift)."""

from __future__ import annotations

import ast
import builtins
import re
from pathlib import Path

import gitrag.errors as errors

ROOT = Path(__file__).resolve().parent.parent
BUILTIN_EXCEPTIONS = {n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)}


def exception_classes_outside_errors(root: Path) -> list[str]:
    """``path:line name`` of each public class under ``root/gitrag`` (errors.py aside) whose
    base is a built-in exception or one of gitrag.errors' classes."""
    ours = {n for n, v in vars(errors).items() if isinstance(v, type) and issubclass(v, BaseException)}
    found = []
    for path in sorted((root / "gitrag").rglob("*.py")):
        if path.relative_to(root).as_posix() == "gitrag/errors.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef) or node.name.startswith("_"):
                continue
            bases = {b.id if isinstance(b, ast.Name) else b.attr for b in node.bases
                     if isinstance(b, ast.Name | ast.Attribute)}
            if bases & (BUILTIN_EXCEPTIONS | ours):
                found.append(f"{path.relative_to(root)}:{node.lineno} {node.name}")
    return found


def drawn_tree(doc: str) -> dict[str, str]:
    """{class: parent} from the box-drawing tree in ``doc``: the lines from one that is just
    ``Exception`` to the next blank one, each name four columns right of its parent's."""
    parents: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    lines = doc.splitlines()
    first = next((i for i, line in enumerate(lines) if line.strip() == "Exception"), len(lines))
    for line in lines[first:]:
        if not line.strip():
            break
        m = re.match(r"^([\s│├└─]*)([A-Z]\w*)", line)
        assert m, f"not a line of the tree: {line!r}"
        col, name = len(m.group(1)), m.group(2)
        while stack and stack[-1][0] >= col:
            stack.pop()
        if stack:
            parents[name] = stack[-1][1]
        stack.append((col, name))
    return parents


def test_every_public_exception_is_defined_in_errors() -> None:
    assert exception_classes_outside_errors(ROOT) == []


def test_the_docstring_draws_the_real_tree() -> None:
    drawn = drawn_tree(errors.__doc__ or "")
    real = {n: v.__bases__[0].__name__ for n, v in vars(errors).items()
            if isinstance(v, type) and issubclass(v, BaseException) and v.__module__ == errors.__name__}
    real["ValueError"] = "Exception"  # drawn as the parent of BadArguments
    assert drawn == real
    assert len(real) > 30


def test_the_old_import_places_still_name_the_same_classes() -> None:
    from gitrag.daemon import client, protocol, server, systemd
    from gitrag.index import symbols
    from gitrag.query.evaluation.datasets import DatasetError
    from gitrag.surfaces.mcp import ToolInputError

    assert client.CommandError is errors.CommandError and client.DaemonError is errors.DaemonError
    assert protocol.ProtocolError is errors.ProtocolError and protocol.BadArguments is errors.BadArguments
    assert server.SocketInUse is errors.SocketInUse and systemd.SystemdError is errors.SystemdError
    assert symbols.NotFound is errors.NotFound and DatasetError is errors.DatasetError
    assert ToolInputError is errors.ToolInputError


def test_the_check_finds_an_exception_defined_elsewhere(tmp_path: Path) -> None:
    (tmp_path / "gitrag" / "query").mkdir(parents=True)
    (tmp_path / "gitrag" / "errors.py").write_text("class GitragError(Exception): pass\n")
    (tmp_path / "gitrag" / "query" / "x.py").write_text(
        "from gitrag import errors\n"
        "class Lost(errors.GitragError): pass\n"
        "class Bad(ValueError): pass\n"
        "class _Private(Exception): pass\n"
        "class Plain: pass\n")
    assert exception_classes_outside_errors(tmp_path) == ["gitrag/query/x.py:2 Lost", "gitrag/query/x.py:3 Bad"]


def test_the_drawing_is_read_as_drawn() -> None:
    doc = """
    Exception
    ├── A   note
    │   ├── B
    │   │   └── C
    │   └── D
    └── ValueError
        └── E
    """
    assert drawn_tree(doc) == {"A": "Exception", "B": "A", "C": "B", "D": "A", "ValueError": "Exception",
                               "E": "ValueError"}
