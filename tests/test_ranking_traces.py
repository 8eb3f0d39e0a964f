"""Whole-issue reading (issue 20): stack frames of every language's runtime, issue-template
boilerplate, and bad issue texts end to end on a real repository with the test embedder."""

from __future__ import annotations

import time

import pytest

from gitrag.index.workspace import open_workspace
from gitrag.query.ranking import analyse, boilerplate, traces
from gitrag.query.ranking.traces import Frame
from gitrag.query.retrieval import ask, search
from tests.gitutil import Repo, index

GO = """panic: runtime error: index out of range [3] with length 3

goroutine 1 [running]:
github.com/acme/tool.(*Command).ExecuteC(0xc000126000)
\t/home/u/go/pkg/mod/github.com/acme/tool@v1.8.0/command.go:1039 +0x3a5
main.main()
\t/app/main.go:12 +0x1d
"""
RUST = """thread 'main' panicked at src/line_range.rs:42:13:
called `Option::unwrap()` on a `None` value
stack backtrace:
   0: rust_begin_unwind
             at /rustc/abc/library/std/src/panicking.rs:645:5
  12: tool::line_range::LineRange::parse_range
             at ./src/line_range.rs:42:13
  13: tool::main
             at ./src/main.rs:7:5
"""
JAVA = """Exception in thread "main" java.lang.NullPointerException
\tat com.acme.json.Reader.fromJson(Reader.java:123)
\tat com.acme.App.main(App.java:5)
"""
JS = """TypeError: Cannot read properties of undefined (reading 'headers')
    at mergeConfig (/app/node_modules/acme/lib/core/mergeConfig.js:12:5)
    at new Client (/app/src/client.ts:3:1)
    at /app/index.js:1:2
"""
GDB = """#0  0x00005555 in json_parse (s=0x0) at src/jv_parse.c:120
#1  0x00005556 in main (argc=1, argv=0x7ff) at src/main.c:33
==1==ERROR: AddressSanitizer: heap-buffer-overflow
    #0 0x4f5a in fmt::format_to /src/fmt/format.h:33:5
"""


@pytest.mark.parametrize(("text", "innermost", "outermost"), [
    (GO, Frame("command.go", 1039, "ExecuteC"), Frame("/app/main.go", 12, "main")),
    (RUST, Frame("src/line_range.rs", 42, ""), Frame("./src/main.rs", 7, "main")),
    (JAVA, Frame("com/acme/json/Reader.java", 123, "fromJson"), Frame("com/acme/App.java", 5, "main")),
    (JS, Frame("/app/node_modules/acme/lib/core/mergeConfig.js", 12, "mergeConfig"), Frame("/app/index.js", 1, "")),
    (GDB, Frame("src/jv_parse.c", 120, "json_parse"), Frame("/src/fmt/format.h", 33, "format_to")),
])
def test_frames_of_each_runtime_outermost_first(text: str, innermost: Frame, outermost: Frame) -> None:
    got = traces.frames(text)
    assert innermost in got and outermost in got
    assert traces.has_frames(text) and analyse(text).long  # a frame makes a question a pasted text
    if text is not GDB:  # gdb and the sanitizer are two traces
        assert got[-1] == innermost and got[0] == outermost
    assert Frame("./src/line_range.rs", 42, "parse_range") in traces.frames(RUST)


def test_plain_text_has_no_frames() -> None:
    text = "at the moment the parser is slow; see file.go for details at line 3\n#1 priority: speed"
    assert traces.frames(text) == [] and not traces.has_frames(text)


ISSUE = """Line range 30:40 is off by one
<!-- Please fill in every section of this template -->
### Steps to reproduce
Run `tool --line-range 30:40 notes.txt`.
**Expected behavior**
lines 30 to 40
- [x] I searched the existing issues
### Environment
- OS: macOS 14.2
- tool version: 0.24.0
pip==24.0
### Notes
After upgrading to 0.24.0 the output starts one line late.
"""


def test_boilerplate_is_removed_and_the_report_kept() -> None:
    got = boilerplate.strip(ISSUE)
    for gone in ("Please fill", "Steps to reproduce", "Expected behavior", "I searched", "macOS", "pip==24.0",
                 "### Environment"):
        assert gone not in got
    for kept in ("Line range 30:40 is off by one", "--line-range 30:40", "lines 30 to 40", "### Notes",
                 "After upgrading to 0.24.0 the output starts one line late."):
        assert kept in got
    q = analyse(ISSUE + "filler words " * 30)
    assert "macos" not in (q.term_weights or {}) and "searched" not in (q.term_weights or {})


def test_boilerplate_and_frames_are_linear_on_half_a_megabyte() -> None:
    log = "\n".join(f"2024-01-01 12:00:{i % 60:02d} INFO worker-{i % 7} took 0.{i % 1000:03d}s v1.2.{i} <!-- x"
                    for i in range(9000))
    assert len(log) > 500_000
    started = time.perf_counter()
    boilerplate.strip(log)
    traces.frames(log)
    assert time.perf_counter() - started < 5.0  # quadratic would be minutes


@pytest.fixture
def project(repo: Repo) -> Repo:
    repo.write("src/line_range.rs", "pub struct LineRange { start: usize, end: usize }\n\nimpl LineRange {\n"
               "    pub fn parse_range(s: &str) -> Option<LineRange> {\n        let (a, b) = s.split_once(':')?;\n"
               "        Some(LineRange { start: a.parse().ok()?, end: b.parse().ok()? })\n    }\n}\n")
    repo.write("src/main.rs", "mod line_range;\n\nfn main() {\n    let r = line_range::LineRange::parse_range(\"30:40\");\n"
               "    println!(\"{}\", r.is_some());\n}\n")
    repo.write("cmd/command.go", "package tool\n\ntype Command struct{ args []string }\n\n"
               "func (c *Command) ExecuteC() error {\n\treturn c.run(c.args[3])\n}\n\n"
               "func (c *Command) run(a string) error {\n\treturn nil\n}\n")
    repo.write("CHANGELOG.md", "# Changes\n\n## 0.24.0\n\n- line range parsing: 30:40 now starts at line 30\n")
    repo.write("README.md", "# tool\n\nPrints files. `--line-range 30:40` prints lines 30 to 40.\n")
    repo.commit("tool")
    index(repo.path)
    return repo


def test_a_rust_panic_leads_to_the_function_that_ran(project: Repo) -> None:
    with open_workspace(project.path) as ws:
        got = search(ws, "tool crashes on a line range\n\n" + RUST.replace(":42:13", ":5:13"), k=3)
    assert got[0].path == "src/line_range.rs" and got[0].start_line <= 5 <= got[0].end_line


def test_a_go_panic_leads_to_the_method_that_ran(project: Repo) -> None:
    go = GO.replace("command.go:1039", "cmd/command.go:6")
    with open_workspace(project.path) as ws:
        got = search(ws, "index out of range when run with no arguments\n\n" + go, k=3)
    assert got[0].path == "cmd/command.go" and "ExecuteC" in got[0].symbol


@pytest.mark.parametrize("question", [
    RUST,  # only a traceback
    ("diff --git a/src/main.rs b/src/main.rs\n--- a/src/main.rs\n+++ b/src/main.rs\n@@ -1,3 +1,3 @@\n"
     "-    let r = line_range::LineRange::parse_range(\"30:40\");\n+    let r = line_range::LineRange::parse_range(\"1:2\");\n"),  # only a diff
    "Line range is off by one\n\n",  # a title and an empty body
    "\n".join(f"2024-01-01 12:00:{i % 60:02d} INFO worker took 0.{i % 1000:03d}s" for i in range(12000)),  # 500 KB
    "El rango de líneas 30:40 empieza una línea tarde. ¿Dónde se analiza el rango?",  # another human language
    "行范围 30:40 从第 31 行开始，在哪里解析？",
    ISSUE,
])
def test_bad_issue_texts_get_ranked_results(project: Repo, question: str) -> None:
    with open_workspace(project.path) as ws:
        got = search(ws, question[:500_000], k=5)
        files = ask(ws, question[:500_000], k=3, files=True).files  # `ask --files`, as an agent pastes an issue
    assert got and all(r.path for r in got)
    assert files and all(f.path and f.chunks for f in files)


def test_a_question_of_only_symbols_gets_results_or_nothing_but_no_error(project: Repo) -> None:
    with open_workspace(project.path) as ws:
        assert isinstance(search(ws, "?? !! ::", k=5), list)
