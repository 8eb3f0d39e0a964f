"""Property tests of the chunker over real code: the stdlib, this repository, generated files.

Properties checked for every file:

* tiling: the chunks' byte ranges, in order, are non-empty and reproduce the file exactly;
* the hard cap: ``count_tokens(chunk.text) <= MAX_TOKENS`` for every chunk;
* lines: ``start_line``/``end_line`` match the byte range (end = line of the last byte);
* naming (Python files that ``ast`` parses and that were not sent to windows): every
  definition ``ast`` sees - top-level functions and classes, and the methods and nested
  classes of classes, recursively - has its ``def``/``class`` keyword inside exactly one
  chunk (true by tiling), and that chunk *names* it. A chunk names a definition with
  qualified name ``Q`` (``Outer.Inner.method``) when one of the entries of
  ``chunk.symbol.split(", ")`` is ``Q`` itself, or is the qualified name of a class that
  encloses ``Q`` (the whole class fit in one chunk, so its methods stayed inside it).

The default run covers a deterministic third of the standard library's ``.py`` files
(every 3rd by sorted path, ~600 files); ``GITRAG_FULL_STDLIB=1`` runs all ~1,800 (about
20 s of CPU; 40 s of wall time on a busy 2-core machine, which is why it is not the
default).
"""

from __future__ import annotations

import ast
import bisect
import os
import subprocess
import sysconfig
import warnings
from pathlib import Path

import pytest

from gitrag.index.chunking import analyze
from gitrag.index.chunking.model import FileAnalysis
from gitrag.index.embedders.hashing import HashEmbedder

MAX_TOKENS = 256
COUNT = HashEmbedder().count_tokens
REPO = Path(__file__).resolve().parents[1]


def stdlib_files() -> list[Path]:
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.rglob("*.py") if "site-packages" not in p.parts)
    if os.environ.get("GITRAG_FULL_STDLIB") == "1":
        return files
    return files[::3]


def check_tiling(data: bytes, analysis: FileAnalysis) -> None:
    pos = 0
    for chunk in analysis.chunks:
        assert chunk.start_byte == pos, (chunk, pos)
        assert chunk.end_byte > chunk.start_byte, chunk
        assert chunk.symbol, chunk
        pos = chunk.end_byte
    assert pos == len(data)
    assert b"".join(data[c.start_byte : c.end_byte] for c in analysis.chunks) == data


def check_lines(data: bytes, analysis: FileAnalysis) -> None:
    line, pos = 1, 0
    for chunk in analysis.chunks:
        line += data.count(b"\n", pos, chunk.start_byte)
        pos = chunk.start_byte
        assert chunk.start_line == line
        assert chunk.end_line == line + data.count(b"\n", chunk.start_byte, chunk.end_byte - 1)


def check_cap(analysis: FileAnalysis, count=COUNT, max_tokens: int = MAX_TOKENS) -> None:
    for chunk in analysis.chunks:
        assert count(chunk.text) <= max_tokens, (chunk.symbol, count(chunk.text))


def ast_definitions(tree: ast.Module) -> list[tuple[str, int, int]]:
    """(qualified name, line, column) of top-level defs and, recursively, class members."""
    out: list[tuple[str, int, int]] = []
    stack: list[tuple[str, list[ast.stmt]]] = [("", tree.body)]
    while stack:
        prefix, body = stack.pop()
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}.{node.name}" if prefix else node.name
                out.append((name, node.lineno, node.col_offset))
                if isinstance(node, ast.ClassDef):
                    stack.append((name, node.body))
    return out


def names(symbol: str, qualified: str) -> bool:
    return any(entry == qualified or qualified.startswith(entry + ".")
               for entry in symbol.split(", "))


def check_python_names(data: bytes, analysis: FileAnalysis) -> int:
    """Checks the naming property; returns the number of definitions checked."""
    if analysis.fallback_reason or analysis.error_bytes:
        return 0  # windows, or a region tree-sitter rejected (e.g. ``except*``): best effort
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes in stdlib test data
            tree = ast.parse(data)
    except (SyntaxError, ValueError):
        return 0
    line_starts = [0]
    pos = data.find(b"\n")
    while pos >= 0:
        line_starts.append(pos + 1)
        pos = data.find(b"\n", pos + 1)
    starts = [c.start_byte for c in analysis.chunks]
    checked = 0
    for qualified, line, col in ast_definitions(tree):
        pos = line_starts[line - 1]
        prefix = data[pos : pos + col]
        pos += col if prefix.isascii() else 0
        index = bisect.bisect_right(starts, pos) - 1
        chunk = analysis.chunks[index]
        assert names(chunk.symbol, qualified), (qualified, line, chunk.symbol, chunk.start_line)
        checked += 1
    return checked


def check_file(path: str, data: bytes) -> FileAnalysis:
    analysis = analyze(path, data, max_tokens=MAX_TOKENS, count_tokens=COUNT)
    check_tiling(data, analysis)
    check_cap(analysis)
    check_lines(data, analysis)
    return analysis


def test_stdlib_python_files() -> None:
    files = stdlib_files()
    assert len(files) > 100
    checked = fallbacks = with_errors = 0
    for path in files:
        data = path.read_bytes()
        analysis = check_file(str(path), data)
        checked += check_python_names(data, analysis)
        fallbacks += bool(analysis.fallback_reason)
        with_errors += bool(analysis.error_bytes)
    assert checked > 1000
    assert fallbacks <= len(files) // 50  # windows are the exception, not the rule
    assert with_errors <= len(files) // 20


def repository_files() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True)
    return [p for p in out.stdout.decode().split("\0") if p]


def test_repository_files() -> None:
    for rel in repository_files():
        path = REPO / rel
        if not path.is_file():
            continue  # deleted in the working tree by a concurrent edit
        data = path.read_bytes()
        analysis = check_file(rel, data)
        if rel.endswith(".py"):
            check_python_names(data, analysis)


@pytest.mark.parametrize("max_tokens", [32, 64, 256, 2048])
def test_cap_holds_for_any_budget(max_tokens: int) -> None:
    data = (REPO / "gitrag" / "index" / "chunking" / "outline.py").read_bytes()
    analysis = analyze("gitrag/index/chunking/outline.py", data, max_tokens=max_tokens,
                       count_tokens=COUNT)
    check_tiling(data, analysis)
    check_cap(analysis, max_tokens=max_tokens)


def test_default_token_estimate_is_len_over_three() -> None:
    data = (REPO / "gitrag" / "index" / "chunking" / "split.py").read_bytes()
    analysis = analyze("gitrag/index/chunking/split.py", data)
    check_tiling(data, analysis)
    assert all(-(-len(c.text) // 3) <= 256 for c in analysis.chunks)


# --- generated files in each language -------------------------------------------------
# Each generator returns the source and, for every definition it wrote, the qualified
# name and the byte offset of the line holding its keyword; the chunk holding that byte
# must name the definition (same rule as for Python above, with "." or "::").

Gen = tuple[str, list[tuple[str, int]]]

# language -> (extension, class open, method, class close, function, statement)
_TEMPLATES: dict[str, tuple[str, str, str, str, str, str]] = {
    "python": ("py", "class {c}(Base):\n", "    def {m}(self, arg):\n{body}",
               "", "def {f}(arg):\n{body}", "{ind}value_{i} = compute_{i}(arg, {i}, 'text {i}')\n"),
    "javascript": ("js", "class {c} extends Base {{\n", "  {m}(arg) {{\n{body}  }}\n", "}}\n",
                   "function {f}(arg) {{\n{body}}}\n", "{ind}const value{i} = compute{i}(arg, {i}, 'text');\n"),
    "typescript": ("ts", "export class {c} extends Base {{\n", "  {m}(arg: number): number {{\n{body}  }}\n",
                   "}}\n", "export const {f} = (arg: number) => {{\n{body}}};\n",
                   "{ind}const value{i}: number = compute{i}(arg, {i});\n"),
    "go": ("go", "type {c} struct {{\n\tBase\n}}\n", "func (s *{c}) {m}(arg int) int {{\n{body}\treturn 0\n}}\n",
           "", "func {f}(arg int) int {{\n{body}\treturn 0\n}}\n", "{ind}value{i} := compute{i}(arg, {i}, \"text\")\n"),
    "rust": ("rs", "impl {c} {{\n", "    fn {m}(&self, arg: u32) -> u32 {{\n{body}        0\n    }}\n", "}}\n",
             "fn {f}(arg: u32) -> u32 {{\n{body}    0\n}}\n", "{ind}let value{i} = compute{i}(arg, {i});\n"),
    "java": ("java", "class {c} extends Base {{\n", "    public int {m}(int arg) {{\n{body}        return 0;\n    }}\n",
             "}}\n", "", "{ind}int value{i} = compute{i}(arg, {i});\n"),
    "cpp": ("cpp", "class {c} : public Base {{\n public:\n", "  int {m}(int arg) {{\n{body}    return 0;\n  }}\n",
            "}};\n", "int {f}(int arg) {{\n{body}  return 0;\n}}\n", "{ind}int value{i} = compute{i}(arg, {i});\n"),
    "csharp": ("cs", "public class {c} : Base {{\n", "    public int {m}(int arg) {{\n{body}        return 0;\n    }}\n",
               "}}\n", "", "{ind}var value{i} = Compute{i}(arg, {i});\n"),
    "kotlin": ("kt", "class {c} : Base() {{\n", "    fun {m}(arg: Int): Int {{\n{body}        return 0\n    }}\n",
               "}}\n", "fun {f}(arg: Int): Int {{\n{body}    return 0\n}}\n", "{ind}val value{i} = compute{i}(arg, {i})\n"),
    "php": ("php", "class {c} extends Base {{\n", "    public function {m}($arg) {{\n{body}        return 0;\n    }}\n",
            "}}\n", "function {f}($arg) {{\n{body}    return 0;\n}}\n", "{ind}$value{i} = compute{i}($arg, {i});\n"),
    "ruby": ("rb", "class {c} < Base\n", "  def {m}(arg)\n{body}  end\n", "end\n",
             "def {f}(arg)\n{body}end\n", "{ind}value{i} = compute{i}(arg, {i})\n"),
    "c": ("c", "", "", "", "int {f}(int arg) {{\n{body}  return 0;\n}}\n", "{ind}int value{i} = compute{i}(arg, {i});\n"),
}


def generate(language: str, seed: int) -> Gen:
    import random

    ext, class_open, method, class_close, function, statement = _TEMPLATES[language]
    rng = random.Random(seed)
    sep = "::" if language in ("rust", "cpp") else "."
    out = "<?php\n" if language == "php" else ""
    expected: list[tuple[str, int]] = []

    def body(indent: str) -> str:
        return "".join(statement.format(ind=indent, i=i) for i in range(rng.choice([1, 2, 4, 12, 60])))

    for n in range(rng.randint(3, 12)):
        if class_open and rng.random() < 0.6:
            cls = f"Type{n}"
            if language in ("go", "rust"):
                out += f"struct {cls} {{ x: u32 }}\n" if language == "rust" else ""
            expected.append((cls, len(out.encode()))) if language != "rust" else None
            out += class_open.format(c=cls)
            inner = "        " if language not in ("ruby", "cpp", "javascript", "typescript") else "    "
            for k in range(rng.randint(1, 8)):
                expected.append((f"{cls}{sep}method{k}", len(out.encode())))
                out += method.format(c=cls, m=f"method{k}", body=body(inner)) + "\n"
            out += class_close.format() + "\n"
        elif function:
            name = f"function{n}"
            expected.append((name, len(out.encode())))
            out += function.format(f=name, body=body("    ")) + "\n"
    return f"generated.{ext}", out, expected


@pytest.mark.parametrize("language", sorted(_TEMPLATES))
def test_generated_files(language: str) -> None:
    for seed in range(6):
        path, source, expected = generate(language, seed)
        data = source.encode()
        analysis = check_file(path, data)
        assert analysis.language == language and not analysis.error_bytes, (seed, source[:300])
        starts = [c.start_byte for c in analysis.chunks]
        for qualified, offset in expected:
            chunk = analysis.chunks[bisect.bisect_right(starts, offset) - 1]
            entries = chunk.symbol.split(", ")
            assert any(e == qualified or qualified.startswith((e + ".", e + "::"))
                       for e in entries), (seed, qualified, chunk.symbol)
