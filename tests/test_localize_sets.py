"""The localization development sets (bench/eval/localize/) and the rules that build and score them.

The sets are data the ranking work is measured on, so they are checked like code: no
held-out repository, gold files that are code and not tests, gold definitions inside
gold files; and the builder's patch reading, definition finding and the bench's BM25
and scoring are checked on small real inputs.
"""

from __future__ import annotations

import json
import sys
from importlib import util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SETS = ROOT / "bench" / "eval" / "localize"


def _load(name: str, path: Path):
    if name not in sys.modules:
        spec = util.spec_from_file_location(name, path)
        module = util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


build = _load("localize_build", SETS / "build.py")
bench = _load("bench_localize", ROOT / "bench" / "bench_localize.py")


def _records() -> list[dict]:
    return [json.loads(line) for path in sorted(SETS.glob("*.jsonl"))
            for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.skipif(not any(SETS.glob("*.jsonl")), reason="the sets are built locally by bench/eval/localize/build.py")
def test_the_sets_hold_no_held_out_repository_and_only_code_gold() -> None:
    """Checks sets built with build.py (not committed: see the folder's README)."""
    rows = _records()
    assert len(rows) >= 100 and len({r["language"] for r in rows}) >= 4
    assert len({r["id"] for r in rows}) == len(rows)
    for r in rows:
        assert r["repo"].lower() not in build.HELD_OUT, r["id"]
        assert r["question"].strip() and len(r["base_commit"]) == 40
        assert r["files"] and len(r["files"]) <= build.MAX_FILES
        for f in r["files"]:
            assert build.code_language(f) and not build.is_test_path(f), (r["id"], f)
        assert {fn["path"] for fn in r["functions"]} <= set(r["files"]), r["id"]
        for fn in r["functions"]:
            assert 1 <= fn["start_line"] <= fn["end_line"], (r["id"], fn)



def test_a_held_out_repository_is_refused_before_anything_is_read(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # a stand-in name on the held-out list (the test names no instance of the real list)
    monkeypatch.setattr(build, "HELD_OUT", build.HELD_OUT | {"example-org/held-out-lib"})
    inst = build.Instance("example-org__held-out-lib-1", "SWE-bench Lite", "example-org/held-out-lib", "0" * 40,
                          "an issue", "")
    other = build.Instance("x__y-1", "SWE-bench Lite", "x/y", "0" * 40, "an issue", "")
    records, excluded = build.build([inst, other], tmp_path, 0, lambda m: None)
    assert records == []
    assert excluded == {"held-out repository": 1, "no mirror of x/y": 1}


PATCH = """diff --git a/pkg/mod.py b/pkg/mod.py
--- a/pkg/mod.py
+++ b/pkg/mod.py
@@ -3,4 +3,5 @@ class A:
     def f(self):
-        return 1
+        return 2
     def g(self):
         pass
+    # added after g's body
@@ -20,3 +21,2 @@
 x = 1
--- a removed line that starts with two dashes
 y = 2
diff --git a/docs/new.md b/docs/new.md
new file mode 100644
--- /dev/null
+++ b/docs/new.md
@@ -0,0 +1 @@
+hello
"""


def test_parse_patch_reads_changed_base_lines_by_hunk_counts() -> None:
    files = build.parse_patch(PATCH)
    assert [(f.old, f.new) for f in files] == [("pkg/mod.py", "pkg/mod.py"), (None, "docs/new.md")]
    # line 4 removed; the insertion after line 6 belongs to line 6; line 21 removed
    # (a '---' line inside a hunk body is a removed line, not a file header)
    assert files[0].changed == [4, 6, 21]


def test_touched_spans_name_the_innermost_definition_or_the_module_lines() -> None:
    src = b"import os\n\nclass A:\n    def f(self):\n        return 1\n    def g(self):\n        pass\n\nX = 1\n"
    spans = build.touched_spans("python", "m.py", src, [5, 9])
    assert [(s["symbol"], s["kind"], s["start_line"], s["end_line"]) for s in spans] == [
        ("A.f", "function", 4, 5), ("<module>", "module", 9, 9)]
    rust = b"struct S;\nimpl S {\n    fn new() -> S {\n        S\n    }\n}\n"
    spans = build.touched_spans("rust", "s.rs", rust, [4])
    assert [(s["symbol"], s["start_line"], s["end_line"]) for s in spans] == [("S.new", 3, 5)]


def test_bm25_ranks_the_chunk_with_the_rare_query_term_first() -> None:
    assert bench.tokens("parseRange_v2") == ["parserange", "parse", "range", "v2", "v", "2"]
    index = bench.BM25()
    index.docs = [{"path": p, "start_line": 1} for p in ("a.rs", "b.rs", "c.rs")]
    index.tfs = [bench.Counter(bench.tokens(t)) for t in ("line range parse", "line line line", "range of lines")]
    index.lengths = [sum(tf.values()) for tf in index.tfs]
    index.avg = sum(index.lengths) / 3
    index.postings = {}
    for i, tf in enumerate(index.tfs):
        for term, n in tf.items():
            index.postings.setdefault(term, []).append((i, n))
    ranked = [d["path"] for _, d in index.search("how is a line range parsed: parse", 3)]
    assert ranked[0] == "a.rs"


@pytest.mark.parametrize(("files", "expect"), [
    (["x.py", "gold.py"], {"acc@1": 0.0, "acc@3": 1.0, "first_rank": 2}),
    (["x.py"], {"acc@1": 0.0, "acc@10": 0.0, "first_rank": None}),
])
def test_score_counts_any_gold_file_and_overlapping_chunks(files: list[str], expect: dict) -> None:
    funcs = [{"path": "gold.py", "symbol": "f", "start_line": 10, "end_line": 20},
             {"path": "gold.py", "symbol": "g", "start_line": 30, "end_line": 40}]
    got = bench.score(["gold.py"], funcs, files, [("gold.py", 18, 25), ("x.py", 1, 50)])
    for key, value in expect.items():
        assert got[key] == value
    assert got["func_recall@5"] == 0.5 and got["funcs_hit"] == ["f"]


def test_file_kind_sorts_the_usual_wrong_answers() -> None:
    kinds = {p: bench.file_kind(p) for p in (
        "CHANGELOG.md", "docs/usage.md", ".github/ISSUE_TEMPLATE/bug.yml", "tests/test_x.py", "src/iter/test.rs",
        "examples/demo.py", "singleheader/simdjson.h", "src/types/index.d.ts", "include/a.h", "pyproject.toml",
        "src/main.rs")}
    assert kinds == {
        "CHANGELOG.md": "changelog", "docs/usage.md": "docs", ".github/ISSUE_TEMPLATE/bug.yml": "ci",
        "tests/test_x.py": "tests", "src/iter/test.rs": "tests", "examples/demo.py": "examples",
        "singleheader/simdjson.h": "generated copy", "src/types/index.d.ts": "declaration",
        "include/a.h": "header", "pyproject.toml": "config", "src/main.rs": "code"}
