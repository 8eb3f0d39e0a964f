"""Build the localization development sets (bench/eval/localize/*.jsonl) from public instance files.

    python bench/eval/localize/build.py --mirrors DIR \
        --swebench lite.json --swebench verified.json --msb rust/sharkdp__fd_dataset.jsonl ... \
        [--max-per-repo N] [--out bench/eval/localize]

Sources (see README.md beside this file for where each file comes from and its licence):

- ``--swebench FILE``: SWE-bench instances (Lite, Verified), as a JSON list or JSONL with
  ``instance_id``, ``repo``, ``base_commit``, ``problem_statement`` and the gold patch
  (``patch`` or ``golden_patch``).
- ``--msb FILE``: Multi-SWE-bench instances (JSONL with ``org``, ``repo``, ``number``,
  ``base.sha``, ``resolved_issues`` (title, body), ``fix_patch``).

For every instance whose repository is not held out (HELD_OUT) and whose git objects are
under ``--mirrors`` (``DIR/owner+name/repo``, a bare git dir as the search tool's fetch
leaves it, or ``DIR/owner+name``, or ``DIR/owner__name``), one record: the issue text as
the question, the non-test code files the fix changes that exist at the base commit, and
the definitions (functions, methods; else the enclosing class or type; else the changed
lines as ``<module>``) that contain the lines the fix changes, parsed from the base file
(Python with ``ast``, other languages with tree-sitter). Instances are written to one
file per language, sorted by repository and base-commit time (the order the bench
indexes them in). Deterministic: the same sources give the same files.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

# the house's held-out repositories (never development data): SWE-bench, semble, rich and
# Multi-SWE-bench ones; compared case-insensitively on owner/name
HELD_OUT = {r.lower() for r in (
    "psf/requests", "pallets/flask", "pytest-dev/pytest", "sphinx-doc/sphinx", "mwaskom/seaborn",
    "pydata/xarray", "encode/httpx", "encode/starlette", "pydantic/pydantic", "aio-libs/aiohttp",
    "MinishLab/model2vec", "pallets/click", "Textualize/rich",
    "BurntSushi/ripgrep", "sharkdp/bat", "tokio-rs/tokio", "tokio-rs/tracing", "grpc/grpc-go",
    "zeromicro/go-zero", "FasterXML/jackson-core", "google/gson", "mockito/mockito",
    "GoogleContainerTools/jib", "iamkun/dayjs", "anuraghazra/github-readme-stats", "expressjs/express",
    "axios/axios", "darkreader/darkreader", "facebook/zstd", "jqlang/jq", "fmtlib/fmt", "nlohmann/json",
    "catchorg/Catch2",
)}

MAX_FILES = 10  # fixes that change more code files than this are left out

# code files by extension -> language label of the record
EXT_LANG = {
    ".py": "python", ".go": "go", ".rs": "rust", ".java": "java", ".kt": "kotlin",
    ".js": "javascript", ".jsx": "javascript", ".mjs": "javascript", ".cjs": "javascript",
    ".ts": "typescript", ".tsx": "typescript", ".mts": "typescript", ".cts": "typescript",
    ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".hpp": "cpp", ".hh": "cpp", ".hxx": "cpp",
    ".ipp": "cpp", ".inl": "cpp",
}

_TEST_DIR = re.compile(r"(^|/)(tests?|testing|__tests__|spec|specs|test-?data|fixtures|benchmarks?)(/|$)", re.I)
_TEST_NAME = re.compile(
    r"(^test_.*\.py$|_test\.py$|^conftest\.py$|^tests?\.(py|rs)$|_test\.go$|(Test|Tests|IT)\.java$|^Test.*\.java$|_test\.rs$|"
    r"\.(test|spec)\.[cm]?[jt]sx?$|_test\.(c|cc|cpp)$|^test_.*\.(c|cc|cpp|h|hpp)$)")


def is_test_path(path: str) -> bool:
    """A test, fixture or benchmark file by path convention (folders ``test``/``tests``/
    ``testing``/``__tests__``/``spec``/``fixtures``/``benchmark``, names ``test_*.py``,
    ``tests.py``, Rust's ``test.rs``/``tests.rs`` modules, ``*_test.go``, ``*Test.java``,
    ``*.test.ts``, ``*.spec.js``...)."""
    name = path.rsplit("/", 1)[-1]
    return bool(_TEST_DIR.search(path.rsplit("/", 1)[0] + "/" if "/" in path else "") or _TEST_NAME.search(name))


def code_language(path: str) -> str | None:
    dot = path.rfind(".")
    return EXT_LANG.get(path[dot:].lower()) if dot > path.rfind("/") else None


# -- patches ---------------------------------------------------------------------------

_DIFF = re.compile(r"^diff --git a/(.+?) b/(.+)$")
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")


@dataclass
class FilePatch:
    old: str | None
    new: str | None
    changed: list[int] = field(default_factory=list)  # base-side lines removed or next to an insertion
    hunks: list[tuple[int, int, str]] = field(default_factory=list)  # base-side (start, end, header context)


def parse_patch(text: str) -> list[FilePatch]:
    """The files of a unified diff with the base-side lines each hunk changes. A pure
    insertion counts the base line above it (the place a fix is made). Hunk
    bodies are read by their line counts, so a removed line that starts with ``--`` is
    never taken for a file header."""
    files: list[FilePatch] = []
    cur: FilePatch | None = None
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _DIFF.match(line)
        h = _HUNK.match(line)
        if m:
            cur = FilePatch(m.group(1), m.group(2))
            files.append(cur)
        elif line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            old = line[4:].split("\t")[0].strip()
            new = lines[i + 1][4:].split("\t")[0].strip()
            old = None if old == "/dev/null" else old.removeprefix("a/")
            new = None if new == "/dev/null" else new.removeprefix("b/")
            if cur is None or cur.hunks:  # no 'diff --git' line before this file
                cur = FilePatch(old, new)
                files.append(cur)
            else:
                cur.old, cur.new = old, new
            i += 2
            continue
        elif h and cur is not None:
            start = int(h.group(1))
            old_count = int(h.group(2)) if h.group(2) is not None else 1
            new_count = int(h.group(4)) if h.group(4) is not None else 1
            cur.hunks.append((start, max(start, start + old_count - 1), h.group(5).strip()))
            old_line = start if old_count else start + 1
            pending_insert = False
            i += 1
            while i < len(lines) and (old_count > 0 or new_count > 0):
                body = lines[i]
                if body.startswith("\\"):
                    i += 1
                    continue
                if body.startswith("-"):
                    cur.changed.append(old_line)
                    old_line += 1
                    old_count -= 1
                    pending_insert = False
                elif body.startswith("+"):
                    if not pending_insert:  # an insertion belongs to the line above it
                        cur.changed.append(max(1, old_line - 1))
                        pending_insert = True
                    new_count -= 1
                else:
                    old_line += 1
                    old_count -= 1
                    new_count -= 1
                    pending_insert = False
                i += 1
            continue
        i += 1
    for f in files:
        f.changed = sorted(set(f.changed))
    return files


# -- definitions at the base commit ------------------------------------------------------

@dataclass(frozen=True)
class Span:
    symbol: str
    kind: str  # function | class | module
    start_line: int
    end_line: int


def python_defs(source: str) -> list[Span] | None:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    out: list[Span] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                start = min([child.lineno] + [d.lineno for d in child.decorator_list])
                name = f"{prefix}{child.name}"
                kind = "class" if isinstance(child, ast.ClassDef) else "function"
                out.append(Span(name, kind, start, child.end_lineno or child.lineno))
                walk(child, name + ".")
            else:
                walk(child, prefix)

    walk(tree, "")
    return out


# tree-sitter node kinds: functions (innermost wins) and containers (used when no function encloses)
TS_FUNCS = {
    "rust": {"function_item", "function_signature_item", "macro_definition"},
    "go": {"function_declaration", "method_declaration", "func_literal"},
    "java": {"method_declaration", "constructor_declaration", "compact_constructor_declaration",
             "lambda_expression"},
    "kotlin": {"function_declaration"},
    "c": {"function_definition"},
    "cpp": {"function_definition", "lambda_expression"},
    "javascript": {"function_declaration", "generator_function_declaration", "method_definition",
                   "function_expression", "arrow_function", "function"},
    "typescript": {"function_declaration", "generator_function_declaration", "method_definition",
                   "function_expression", "arrow_function", "function", "method_signature"},
}
TS_CONTAINERS = {
    "rust": {"impl_item", "trait_item", "struct_item", "enum_item", "mod_item", "union_item", "const_item",
             "static_item", "macro_invocation"},
    "go": {"type_declaration", "var_declaration", "const_declaration"},
    "java": {"class_declaration", "interface_declaration", "enum_declaration", "record_declaration",
             "annotation_type_declaration"},
    "kotlin": {"class_declaration", "object_declaration"},
    "c": {"struct_specifier", "union_specifier", "enum_specifier", "declaration", "preproc_function_def",
          "preproc_def"},
    "cpp": {"class_specifier", "struct_specifier", "union_specifier", "enum_specifier", "namespace_definition",
            "template_declaration", "declaration", "preproc_function_def", "preproc_def"},
    "javascript": {"class_declaration", "class", "lexical_declaration", "variable_declaration"},
    "typescript": {"class_declaration", "abstract_class_declaration", "interface_declaration",
                   "type_alias_declaration", "enum_declaration", "lexical_declaration", "variable_declaration",
                   "module", "internal_module"},
}
_NAME_KINDS = {"identifier", "field_identifier", "type_identifier", "property_identifier", "qualified_identifier",
               "destructor_name", "operator_name", "scoped_identifier", "simple_identifier"}


def _ts_parser(lang: str, path: str):
    import tree_sitter as ts

    if lang == "python":
        import tree_sitter_python as m
        return ts.Parser(ts.Language(m.language()))
    if lang == "rust":
        import tree_sitter_rust as m
    elif lang == "go":
        import tree_sitter_go as m
    elif lang == "java":
        import tree_sitter_java as m
    elif lang == "kotlin":
        import tree_sitter_kotlin as m
    elif lang == "c":
        import tree_sitter_c as m
    elif lang == "cpp":
        import tree_sitter_cpp as m
    elif lang == "javascript":
        import tree_sitter_javascript as m
    elif lang == "typescript":
        import tree_sitter_typescript as m
        fn = m.language_tsx if path.endswith(("x",)) else m.language_typescript
        return ts.Parser(ts.Language(fn()))
    else:
        return None
    return ts.Parser(ts.Language(m.language()))


def _node_name(node, src: bytes) -> str:
    name = node.child_by_field_name("name")
    if name is not None:
        return src[name.start_byte:name.end_byte].decode("utf-8", "replace")
    decl = node.child_by_field_name("declarator")
    while decl is not None:  # C/C++: function_declarator -> identifier / qualified name
        if decl.type in _NAME_KINDS:
            return src[decl.start_byte:decl.end_byte].decode("utf-8", "replace")
        nxt = decl.child_by_field_name("declarator")
        if nxt is None:
            for c in decl.children:
                if c.type in _NAME_KINDS:
                    return src[c.start_byte:c.end_byte].decode("utf-8", "replace")
        decl = nxt
    if node.type in ("lexical_declaration", "variable_declaration", "declaration", "const_item", "static_item"):
        for c in node.children:
            if c.type in ("variable_declarator", "init_declarator"):
                key = c.child_by_field_name("name") or c.child_by_field_name("declarator")
                if key is not None:
                    return src[key.start_byte:key.end_byte].decode("utf-8", "replace")
    if node.type == "impl_item":
        t = node.child_by_field_name("type")
        if t is not None:
            return src[t.start_byte:t.end_byte].decode("utf-8", "replace")
    if node.type in ("arrow_function", "function_expression", "function", "func_literal", "lambda_expression"):
        parent = node.parent
        while parent is not None and parent.type in ("parenthesized_expression", "call_expression", "arguments"):
            parent = parent.parent
        if parent is not None and parent.type in ("variable_declarator", "pair", "assignment_expression",
                                                   "public_field_definition", "field_definition"):
            key = parent.child_by_field_name("name") or parent.child_by_field_name("key") \
                or parent.child_by_field_name("left") or parent.child_by_field_name("property")
            if key is not None:
                return src[key.start_byte:key.end_byte].decode("utf-8", "replace")
        return "<anonymous>"
    for c in node.children:
        if c.type in _NAME_KINDS:
            return src[c.start_byte:c.end_byte].decode("utf-8", "replace")
    return f"<{node.type}>"


def ts_defs(lang: str, path: str, source: bytes) -> list[Span] | None:
    parser = _ts_parser(lang, path)
    if parser is None:
        return None
    tree = parser.parse(source)
    funcs, conts = TS_FUNCS.get(lang, set()), TS_CONTAINERS.get(lang, set())
    out: list[Span] = []

    def walk(node, prefix: str) -> None:
        for child in node.children:
            if child.type in funcs or child.type in conts:
                name = _node_name(child, source)
                # anonymous functions take the name of the definition holding them
                qual = prefix + name if not name.startswith("<") or not prefix else prefix.rstrip(".")
                kind = "function" if child.type in funcs else "class"
                out.append(Span(qual or name, kind, child.start_point[0] + 1, child.end_point[0] + 1))
                walk(child, (qual or name) + ".")
            else:
                walk(child, prefix)

    walk(tree.root_node, "")
    return out


def enclosing(defs: list[Span], line: int) -> Span | None:
    """The innermost function holding ``line``; else the innermost class or type."""
    best_f = best_c = None
    for d in defs:
        if d.start_line <= line <= d.end_line:
            if d.kind == "function" and (best_f is None or d.end_line - d.start_line < best_f.end_line - best_f.start_line):
                best_f = d
            if d.kind == "class" and (best_c is None or d.end_line - d.start_line < best_c.end_line - best_c.start_line):
                best_c = d
    return best_f or best_c


def touched_spans(lang: str, path: str, source: bytes, changed: list[int]) -> list[dict]:
    """The definitions containing the ``changed`` base lines of ``path`` (deduplicated,
    in file order); lines outside any become ``<module>`` spans of consecutive lines."""
    if lang == "python":
        defs = python_defs(source.decode("utf-8", "replace"))
        if defs is None:
            defs = ts_defs("python", path, source) or []
    else:
        defs = ts_defs(lang, path, source) or []
    spans: dict[tuple[int, int], Span] = {}
    loose: list[int] = []
    nlines = source.count(b"\n") + 1
    for line in changed:
        if line > nlines:
            continue
        d = enclosing(defs, line)
        if d is None:
            loose.append(line)
        else:
            spans[(d.start_line, d.end_line)] = d
    runs: list[list[int]] = []
    for line in loose:
        if runs and line - runs[-1][-1] <= 3:
            runs[-1].append(line)
        else:
            runs.append([line])
    for r in runs:
        spans[(r[0], r[-1])] = Span("<module>", "module", r[0], r[-1])
    return [{"path": path, "symbol": s.symbol, "kind": s.kind, "start_line": s.start_line, "end_line": s.end_line}
            for s in sorted(spans.values(), key=lambda s: (s.start_line, s.end_line))]


# -- git ------------------------------------------------------------------------------------

def find_mirror(mirrors: Path, repo: str) -> Path | None:
    """The git dir of ``repo`` (owner/name, any case) under ``mirrors``."""
    owner, name = repo.lower().split("/", 1)
    wanted = (f"{owner}+{name}", f"{owner}__{name}", name)
    entries = {p.name.lower(): p for p in mirrors.iterdir()} if mirrors.is_dir() else {}
    for key in wanted:
        base = entries.get(key)
        if base is None:
            continue
        for cand in (base / "repo", base):
            if (cand / "objects").is_dir() or (cand / ".git").exists():
                return cand
    return None


def git(gitdir: Path, *args: str, check: bool = True) -> bytes | None:
    proc = subprocess.run(["git", "--git-dir", str(gitdir if (gitdir / "objects").is_dir() else gitdir / ".git"),
                           *args], capture_output=True)
    if proc.returncode != 0:
        if check:
            return None
        return None
    return proc.stdout


# -- sources -------------------------------------------------------------------------------

@dataclass
class Instance:
    id: str
    source: str
    repo: str
    base_commit: str
    question: str
    patch: str


def read_swebench(path: Path, source: str) -> list[Instance]:
    text = path.read_text(encoding="utf-8")
    rows = json.loads(text) if text.lstrip().startswith("[") else [json.loads(x) for x in text.splitlines() if x.strip()]
    return [Instance(r["instance_id"], source, r["repo"], r["base_commit"], r["problem_statement"],
                     r.get("patch") or r.get("golden_patch") or "") for r in rows]


def read_msb(path: Path) -> list[Instance]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        issues = r.get("resolved_issues") or []
        if not issues:
            continue
        question = "\n\n".join(f"{i.get('title') or ''}\n{i.get('body') or ''}".strip() for i in issues)
        out.append(Instance(f"{r['org']}__{r['repo']}-{r['number']}", "Multi-SWE-bench", f"{r['org']}/{r['repo']}",
                            r["base"]["sha"], question, r.get("fix_patch") or ""))
    return out


def build(instances: list[Instance], mirrors: Path, max_per_repo: int, log) -> tuple[list[dict], Counter]:
    excluded: Counter = Counter()
    seen: set[str] = set()
    by_repo: dict[str, list[dict]] = defaultdict(list)
    cpp_repo: dict[str, bool] = {}
    for inst in instances:
        if inst.id in seen:
            continue
        seen.add(inst.id)
        if inst.repo.lower() in HELD_OUT:
            excluded["held-out repository"] += 1
            continue
        gitdir = find_mirror(mirrors, inst.repo)
        if gitdir is None:
            excluded[f"no mirror of {inst.repo}"] += 1
            continue
        ct = git(gitdir, "show", "-s", "--format=%ct", inst.base_commit)
        if not ct:
            excluded["base commit not in the mirror"] += 1
            continue
        files, tests, other, functions = [], [], [], []
        for fp in parse_patch(inst.patch):
            path = fp.old or fp.new
            if path is None:
                continue
            lang = code_language(path)
            if is_test_path(path):
                tests.append(path)
                continue
            if lang is None:
                other.append(path)
                continue
            if fp.old is None:  # a file the fix adds: nothing to find at the base commit
                other.append(path)
                continue
            blob = git(gitdir, "show", f"{inst.base_commit}:{fp.old}")
            if blob is None:
                other.append(path)
                continue
            files.append(fp.old)
            functions.append((lang, fp.old, blob, fp.changed))
        if not files:
            excluded["fix changes no code file present at the base commit"] += 1
            continue
        if len(set(files)) > MAX_FILES:
            excluded[f"fix changes more than {MAX_FILES} code files (a refactoring, not a localization)"] += 1
            continue
        if not inst.question.strip():
            excluded["empty issue text"] += 1
            continue
        if inst.repo not in cpp_repo:  # a C++ repository's .h files are C++
            names = git(gitdir, "ls-tree", "-r", "--name-only", inst.base_commit) or b""
            cpp_repo[inst.repo] = bool(re.search(rb"\.(cc|cpp|cxx|hpp)$", names, re.M))
        langs = Counter("cpp" if code_language(f) == "c" and cpp_repo[inst.repo] else code_language(f)
                        for f in files)
        language = sorted(langs.items(), key=lambda kv: (-kv[1], kv[0] or ""))[0][0]
        functions = [s for lang, path, blob, changed in functions
                     for s in touched_spans("cpp" if lang == "c" and cpp_repo[inst.repo] else lang, path, blob,
                                            changed)]
        by_repo[inst.repo].append({
            "id": inst.id, "source": inst.source, "repo": inst.repo, "base_commit": inst.base_commit,
            "base_time": int(ct.strip()), "language": language, "question": inst.question,
            "files": sorted(set(files)), "functions": functions,
            "test_files": sorted(set(tests)), "other_files": sorted(set(other)),
        })
    records = []
    for repo in sorted(by_repo):
        rows = sorted(by_repo[repo], key=lambda r: (r["base_time"], r["id"]))
        if max_per_repo and len(rows) > max_per_repo:
            excluded[f"over --max-per-repo ({repo})"] += len(rows) - max_per_repo
            rows = rows[-max_per_repo:]  # the newest: consecutive base commits, small incremental syncs
        records += rows
        log(f"{repo}: {len(rows)} issues")
    return records, excluded


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mirrors", required=True, type=Path, help="folder of the repositories' git dirs")
    ap.add_argument("--swebench", action="append", default=[], metavar="NAME=FILE",
                    help="SWE-bench instances (JSON list or JSONL); NAME is the source's name, e.g. 'SWE-bench Lite'")
    ap.add_argument("--msb", action="append", default=[], type=Path, help="Multi-SWE-bench JSONL (repeatable)")
    ap.add_argument("--max-per-repo", type=int, default=0, help="keep the newest N issues of each repository")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    args = ap.parse_args()
    instances: list[Instance] = []
    for spec in args.swebench:
        name, _, file = spec.partition("=")
        instances += read_swebench(Path(file), name)
    for file in args.msb:
        instances += read_msb(file)
    records, excluded = build(instances, args.mirrors, args.max_per_repo, lambda m: print(m, file=sys.stderr))
    by_lang: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        by_lang[r["language"]].append(r)
    args.out.mkdir(parents=True, exist_ok=True)
    for old in args.out.glob("*.jsonl"):
        old.unlink()
    for lang, rows in sorted(by_lang.items()):
        with open(args.out / f"{lang}.jsonl", "w", encoding="utf-8") as fh:
            for r in rows:
                fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(json.dumps({"written": {k: len(v) for k, v in sorted(by_lang.items())},
                      "repositories": dict(Counter(r["repo"] for r in records)),
                      "excluded": dict(excluded)}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
