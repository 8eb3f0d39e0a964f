"""Hooks and files that broke the index in issue 13: hooks rewritten with CRLF line ends,
content-free files, vendored and minified code. Real repositories with real commits, the
real daemon and hooks, the real chunker and store; each case ends in a comparison with a
from-scratch index of HEAD (0 points lost or wrong).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from gitrag.index.chunking import analyze
from tests.daemonutil import gitrag, indexed_at, stop_daemon, wait_for
from tests.gitutil import GIT_ENV, Repo
from tests.reliability import lost_wrong, points, record, run

HOOKS_GROUP = "hooks"
INPUT_GROUP = "bad input"


def _git_commit(repo: Repo, message: str) -> subprocess.CompletedProcess[str]:
    """``git commit`` as a user runs it: the hooks' complaints are on its stderr."""
    repo.git("add", "-A")
    return subprocess.run(["git", "commit", "-q", "-m", message], cwd=repo.path, capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV}, check=True)


def test_crlf_hooks_are_reported_by_doctor_and_repaired_by_install(
    repo: Repo, daemon: subprocess.Popen[bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hooks = repo.path / ".git" / "hooks"
    repo.write("a.py", "def first():\n    return 1\n")
    repo.commit("first")
    gitrag("install", "--no-systemd", "--repo", str(repo.path))
    for name in ("post-commit", "post-checkout", "post-merge", "post-rewrite"):  # what core.autocrlf does
        path = hooks / name
        path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))

    repo.write("b.py", "def second():\n    return 2\n")
    broken = _git_commit(repo, "second")
    assert "cannot run" in broken.stderr  # the fault is real: git could not start the hook

    doctor = json.loads(gitrag("doctor", "--json", "--repo", str(repo.path), check=False).stdout)
    hooks_check = next(c for c in doctor["checks"] if c["name"] == "hooks")
    assert hooks_check["status"] == "fail" and "CRLF" in hooks_check["detail"], hooks_check
    assert "gitrag install" in hooks_check["fix"]

    again = gitrag("install", "--no-systemd", "--no-index", "--repo", str(repo.path))
    assert "already installed" not in again.stdout and "repaired" in again.stdout, again.stdout
    assert all(b"\r" not in (hooks / n).read_bytes() for n in ("post-commit", "post-merge"))
    doctor = json.loads(gitrag("doctor", "--json", "--repo", str(repo.path), check=False).stdout)
    assert next(c for c in doctor["checks"] if c["name"] == "hooks")["status"] == "ok"

    repo.write("c.py", "def third():\n    return 3\n")
    fixed = _git_commit(repo, "third")
    assert "cannot run" not in fixed.stderr
    head = repo.head()
    wait_for(lambda: indexed_at(repo.path, head), "the repaired hook to tell the daemon")  # it really fires
    stop_daemon(daemon)  # it holds the store: read the points back ourselves
    lost, wrong = lost_wrong(repo.path, tmp_path, monkeypatch)
    assert (lost, wrong) == (0, 0)
    record("hooks rewritten with CRLF line ends (core.autocrlf)", "doctor: FAIL hooks … CRLF line ends -> "
           "gitrag install; install repairs them; the next commit reaches the daemon", lost, wrong, HOOKS_GROUP)


CONTENT_FREE = {  # path -> (bytes, what it is)
    "blank.py": (b"  \n\t\n   \n", "a file of only whitespace"),
    "bom.txt": (b"\xef\xbb\xbf", "a file of only a UTF-8 BOM"),
    "newlines.md": (b"\n" * 40, "a file of only newlines"),
    "pkg/__init__.py": (b"\xef\xbb\xbf\r\n\r\n", "a BOM and blank CRLF lines"),
    "tool.sh": (b"#!/usr/bin/env bash\n\n", "a script that is only its shebang"),
}


def test_content_free_files_are_indexed_without_points_and_never_answered(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo.write("pkg/core.py", "".join(f"def handler_{i}(request):\n    \"\"\"Handle request {i}.\"\"\"\n"
                                      f"    return request.reply({i})\n\n\n" for i in range(6)))
    for path, (data, _) in CONTENT_FREE.items():
        repo.write(path, data)
    repo.commit("code and content-free files")
    proc = run("index", "--json", "--repo", str(repo.path))
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["files_indexed"] == len(CONTENT_FREE) + 1 and summary["files_skipped"] == 0
    stored, manifest = points(repo.path)
    held = {json.loads(p)["path"] for p in manifest.values()}
    assert held == {"pkg/core.py"}, held  # was: one '<module>' point per content-free file
    for question in ("what does this do", "<module>", "module"):  # vague questions: were answered by them
        ask = run("ask", question, "--json", "--no-answer", "-k", "50", "--repo", str(repo.path))
        assert ask.returncode == 0, ask.stderr
        assert {r["path"] for r in json.loads(ask.stdout)["results"]} <= {"pkg/core.py"}
    for path, (data, _) in CONTENT_FREE.items():
        chunks = analyze(path, data).chunks  # the chunks still tile the file: nothing is lost from it
        assert b"".join(data[c.start_byte:c.end_byte] for c in chunks) == data
        assert chunks and not any(c.embeddable for c in chunks)
    lost, wrong = lost_wrong(repo.path, tmp_path, monkeypatch)
    assert (lost, wrong) == (0, 0) and set(stored) == set(manifest)
    for _, what in CONTENT_FREE.values():
        record(what, "indexed, no point (content-free chunks tile the file, not embedded); never answered",
               lost, wrong, INPUT_GROUP)


MINIFIED_LINE = b"var a=" + b"f(1),g(2)," * 30_000 + b"0;"  # 300 KB on one line
SKIPPED_BY_DEFAULT = {  # path -> (bytes, reason, what it is)
    "web/static/vendor.min.js": (MINIFIED_LINE, "minified (*.min.js)", "a 300 KB one-line vendor.min.js"),
    "web/static/bundle.js": (MINIFIED_LINE + b"\n", "minified (average line 300008 bytes)",
                             "a one-line bundle.js without .min in its name"),
    "web/static/app.js.map": (b'{"version":3,"sources":["app.ts"],"mappings":"AAAA"}\n', "generated (source map)",
                              "a source map"),
    "api/api.pb.go": (b"// Code generated by protoc-gen-go. DO NOT EDIT.\n// source: api.proto\n\npackage api\n\n"
                      b"type Reply struct{ Text string }\n", "generated (Code generated by protoc-gen-go. DO NOT EDIT)",
                      "Go code marked 'Code generated ... DO NOT EDIT.'"),
    "gen/schema.py": (b"# @generated by schemagen\nSCHEMA = {'a': 1}\n", "generated (@generated)",
                      "a Python file marked @generated"),
    "vendor/github.com/lib/pq/conn.go": (b"package pq\n\nfunc Open() error { return nil }\n",
                                         "vendored (vendor/; linguist vendor.yml)", "Go's vendor/ folder"),
    "lib/third_party/zlib/zutil.c": (b"int zutil(void) { return 0; }\n",
                                     "vendored (third_party/; linguist vendor.yml)", "a third_party/ folder"),
}
NODE_MODULES = 300


def _vendored_repo(repo: Repo) -> None:
    repo.write("src/server.py", "".join(f"def serve_route_{i}(request):\n    \"\"\"Serve route {i}.\"\"\"\n"
                                        f"    return request.respond({i})\n\n\n" for i in range(5)))
    repo.write("src/client.js", "export function fetchRoute(id) {\n  return fetch('/route/' + id);\n}\n")
    for i in range(NODE_MODULES):  # a committed node_modules/: the dependency tree of a small app
        repo.write(f"node_modules/pkg{i % 30}/lib/mod{i}.js",
                   f"module.exports = function route{i}(request) {{ return request.respond({i}); }};\n")
    repo.write("web/bower_components/jquery/jquery.js", "function jQuery(selector) { return selector; }\n")
    for path, (data, _, _) in SKIPPED_BY_DEFAULT.items():
        repo.write(path, data)
    repo.commit("an app with its dependencies committed")


def test_vendored_minified_and_generated_files_are_skipped_with_reasons_unless_re_included(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _vendored_repo(repo)
    proc = run("index", "--json", "--repo", str(repo.path), timeout=300)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    reported = {s["path"]: s["reason"] for s in summary["skipped"]}
    for path, (_, reason, _) in SKIPPED_BY_DEFAULT.items():
        assert reported.get(path) == reason, (path, reported.get(path))
    vendored = [p for p, r in reported.items() if r == "vendored (node_modules/; linguist vendor.yml)"]
    assert len(vendored) == NODE_MODULES
    assert reported["web/bower_components/jquery/jquery.js"] == "vendored (bower_components/; linguist vendor.yml)"
    assert summary["files_indexed"] == 2  # was: every file, and 1,000+ chunks of the minified line
    stored, manifest = points(repo.path)
    assert {json.loads(p)["path"] for p in manifest.values()} == {"src/server.py", "src/client.js"}
    ask = run("ask", "route request respond", "--json", "--no-answer", "-k", "20", "--repo", str(repo.path))
    assert {r["path"] for r in json.loads(ask.stdout)["results"]} <= {"src/server.py", "src/client.js"}

    status = json.loads(run("status", "--json", "--repo", str(repo.path)).stdout)
    counts = next(b for b in status["repos"][0]["branches"] if b["current"])["skipped"]
    # counted per kind of reason: node_modules/, bower_components/, vendor/, third_party/
    assert counts == {"vendored": NODE_MODULES + 3, "generated": 3, "minified": 2}
    assert "skipped files: 303 vendored, 3 generated, 2 minified" in run("status", "--repo", str(repo.path)).stdout
    lost, wrong = lost_wrong(repo.path, tmp_path, monkeypatch)
    assert (lost, wrong) == (0, 0)
    for _, reason, what in SKIPPED_BY_DEFAULT.values():
        record(what, f"skipped, reported: {reason!r} (index and status)", lost, wrong, INPUT_GROUP)
    record(f"a committed node_modules/ ({NODE_MODULES} files)", "skipped, reported: 'vendored (node_modules/; "
           "linguist vendor.yml)' (index and status); never answered", lost, wrong, INPUT_GROUP)

    # the project says it wants them: a .gitragignore negation or linguist-vendored=false re-includes
    repo.write(".gitragignore", "!vendor/\n!web/static/vendor.min.js\n")
    repo.write(".gitattributes", "lib/third_party/** linguist-vendored=false\n")
    repo.commit("index our vendored Go code and the minified file after all")
    again = json.loads(run("index", "--json", "--repo", str(repo.path), timeout=300).stdout)
    reported = {s["path"]: s["reason"] for s in again["skipped"]}
    for path in ("vendor/github.com/lib/pq/conn.go", "web/static/vendor.min.js", "lib/third_party/zlib/zutil.c"):
        assert path not in reported
    assert reported["web/static/bundle.js"].startswith("minified") and len(reported) == len(vendored) + 5
    _, manifest = points(repo.path)
    held = {json.loads(p)["path"] for p in manifest.values()}
    assert {"vendor/github.com/lib/pq/conn.go", "web/static/vendor.min.js", "lib/third_party/zlib/zutil.c"} <= held
    lost, wrong = lost_wrong(repo.path, tmp_path, monkeypatch)
    assert (lost, wrong) == (0, 0)
    record("vendored/minified paths re-included (`!vendor/` in .gitragignore, linguist-vendored=false)",
           "indexed again on the next sync; the other defaults still apply", lost, wrong, INPUT_GROUP)
