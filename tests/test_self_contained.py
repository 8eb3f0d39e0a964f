"""The repository stands on its own: no tracked file refers to a path outside it.

Someone who clones the repository has none of the folders that lived beside it on the
project's machines (the workplace's shared eval data, design and CLI contract), so every
reference must point inside the checkout (bench/eval/, docs/). Three rules over every
tracked text file (``git ls-files``):

* no absolute path into the workplace, and no ``shared`` folder beside the repository
  (``../shared``, ``"shared" / "eval"``, the design/contract documents by name);
* a relative path written with ``../`` (a Markdown link, a docstring, a shell line)
  resolves, from the file's folder, to somewhere inside the repository;
* a Markdown link to a local file points at a file that exists in the repository.
"""

from __future__ import annotations

import functools
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# spelled in pieces so this file does not match itself
WORK = "/" + "work/"
SHARED = "sha" + "red"
FORBIDDEN = [
    (re.compile(re.escape(WORK)), "an absolute path into the workplace"),
    (re.compile(rf"(?<![\w-]){SHARED}/(?:eval|design|cli-contract)"), f"the workplace's {SHARED}/ folder"),
    (re.compile(rf"\.\./{SHARED}\b"), f"a {SHARED}/ folder beside the repository"),
    (re.compile(rf"""["']{SHARED}["']\s*/"""), f"a {SHARED}/ folder built with pathlib"),
]
# documents that lived beside the repository, named: wrong unless the repository has one
OUTSIDE_DOCUMENTS = re.compile(r"\b(?:design|cli-" + r"contract)\.md\b")
# ``../`` at the start of a path (not inside one, as in app/../x), then the path itself
PARENT_PATH = re.compile(r"(?<![\w/.~-])((?:\.\./)+)([\w.@+-]+(?:/[\w.@+-]+)*)?")
MD_LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")
# test data that spells a path escape on purpose (the thing under test), file -> strings
ALLOWED_ESCAPES = {
    "tests/test_reliability_socket.py": {"../../etc/passwd"},  # an op name an attacker might send
}
# third-party issue texts quoted verbatim (bench/eval/localize/): the paths in their
# tracebacks are the reporters' machines, not references of this repository
QUOTED_DATA = re.compile(r"^bench/eval/localize/[^/]+\.jsonl$")


@functools.cache
def tracked_text_files() -> list[Path]:
    names = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    files = []
    for name in filter(None, names):
        path = ROOT / name.decode()
        if path.is_file() and not path.is_symlink():
            head = path.read_bytes()[:8192]
            if b"\0" not in head:
                files.append(path)
    return files


def problems_in(rel: str, text: str) -> list[str]:
    """Every reference in ``text`` (the file at repository path ``rel``) to a path
    outside the repository, as ``rel:line: what``."""
    found = []
    folder = (ROOT / rel).parent
    allowed = ALLOWED_ESCAPES.get(rel, set())
    for n, line in enumerate(text.splitlines(), 1):
        for pattern, what in FORBIDDEN:
            if pattern.search(line):
                found.append(f"{rel}:{n}: {what}: {line.strip()[:120]}")
        for m in OUTSIDE_DOCUMENTS.finditer(line):
            if m.group(0) not in {p.name for p in tracked_text_files()}:
                found.append(f"{rel}:{n}: {m.group(0)} is not in the repository: {line.strip()[:120]}")
        for m in PARENT_PATH.finditer(line):
            written = m.group(0)
            if written in allowed:
                continue
            target = (folder / written).resolve()
            if not target.is_relative_to(ROOT):
                found.append(f"{rel}:{n}: {written!r} leaves the repository: {line.strip()[:120]}")
        if rel.endswith(".md"):
            for m in MD_LINK.finditer(line):
                link = m.group(1)
                if re.match(r"^[a-z][a-z0-9+.-]*:", link):  # https:, mailto:
                    continue
                target = (folder / link).resolve()
                if not target.is_relative_to(ROOT) or not target.exists():
                    found.append(f"{rel}:{n}: the link {link!r} points at nothing in the repository")
    return found


def test_no_tracked_file_refers_to_a_path_outside_the_repository() -> None:
    files = [p for p in tracked_text_files() if p != Path(__file__).resolve()  # this file spells the refused forms
             and not QUOTED_DATA.match(str(p.relative_to(ROOT)))]
    assert len(files) > 50 and any(p.name == "README.md" for p in files)
    problems = [p for path in files for p in problems_in(str(path.relative_to(ROOT)), path.read_text(errors="replace"))]
    assert not problems, "paths outside the repository:\n" + "\n".join(problems)


@pytest.mark.parametrize("line", [
    f"The architecture is in the workplace's `{SHARED}/design.md`.",
    f"gitrag eval ../{SHARED}/eval/click-8.1.7.jsonl --repo /tmp/corpus/click",
    f"{WORK}{SHARED}/eval/make_corpus.sh click==8.1.7 /tmp/corpus/click",
    f'QUESTIONS = HERE.parent.parent / "{SHARED}" / "eval" / "click-8.1.7.jsonl"',
    "see ``../../cli-" + "contract.md``",
    "the notes are in [the design](../../notes/design.txt)",
    "run ../../tools/make_corpus.sh first",
])
def test_the_check_catches_an_outside_path(line: str) -> None:
    assert problems_in("docs/example.md", line), line


@pytest.mark.parametrize("line", [
    "gitrag eval bench/eval/click-8.1.7.jsonl --repo /tmp/corpus/click",
    "see [the daemon](daemon.md) and [the README](../README.md)",
    'path="app/../../secret.py"  # refused by clean_path',
    "shared by every repository; a shared /tmp",
])
def test_the_check_accepts_paths_inside(line: str) -> None:
    assert not problems_in("docs/example.md", line), line


def test_the_readme_two_commands_are_scripts_of_the_repository() -> None:
    """The block .ci/run extracts: two lines, each running an executable script of the
    repository; .ci/run reads them from the README (it holds no copy of them)."""
    readme = (ROOT / "README.md").read_text()
    marker = "<!-- the two commands -->"
    assert marker in readme and marker in (ROOT / ".ci" / "run").read_text()
    block = readme.split(marker, 1)[1].split("```", 2)[1].splitlines()[1:]
    commands = [line.split("#", 1)[0].strip() for line in block if line.strip()]
    assert len(commands) == 2, commands
    for command in commands:
        script = ROOT / command.split()[0]
        assert script.is_file() and script.stat().st_mode & 0o111, f"{command!r}: no executable {script}"
        assert command not in (ROOT / ".ci" / "run").read_text(), f".ci/run holds a copy of {command!r}"
