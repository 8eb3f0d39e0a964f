"""The ``--json`` contract: every field the README documents is in the real output of
each command, and the output has no field the README does not document.

The README's "JSON output" section is parsed (one table per command, first column the
field path), so the documentation and this test cannot drift apart. Each command runs
as a subprocess on a real git repository (``hash`` embedder), in-process and, for the
commands the daemon serves, through a real daemon; ``ask`` also runs with a chat model
(the Ollama stand-in), so the answer fields carry objects.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.gitutil import Repo
from tests.ollama_stub import OllamaStub

README = Path(__file__).resolve().parents[1] / "README.md"
COMMANDS = ("index", "ask", "status", "gc", "eval", "doctor", "log", "related")
# objects whose keys are data, not field names: their keys are written <mode>, <kind>
DATA_KEYS = {"modes": "<mode>", "modes.<mode>.by_kind": "<kind>", "repos[].branches[].skipped": "<reason>"}


def documented() -> dict[str, set[str]]:
    """``{command: {field path}}`` from the README's ``### `gitrag CMD --json` `` tables."""
    text = README.read_text()
    section = text.split("\n## JSON output\n", 1)
    assert len(section) == 2, "README.md has no '## JSON output' section"
    body = section[1].split("\n## ", 1)[0]
    tables: dict[str, set[str]] = {}
    current = None
    for line in body.splitlines():
        heading = re.match(r"^### `gitrag (\w+) --json`", line)
        if heading:
            current = heading.group(1)
            tables[current] = set()
        elif current and (row := re.match(r"^\| `([^`]+)` \|", line)):
            tables[current].add(row.group(1))
    return tables


def paths(value: Any, prefix: str = "") -> Iterator[str]:
    """Every field path of a JSON value: ``a.b`` for objects, ``a[].b`` for list items."""
    if isinstance(value, dict):
        for key, child in value.items():
            name = DATA_KEYS.get(prefix, key)
            path = f"{prefix}.{name}" if prefix else name
            if prefix not in DATA_KEYS:
                yield path
            yield from paths(child, path)
    elif isinstance(value, list):
        for item in value:
            yield from paths(item, f"{prefix}[]")


def run_json(*args: str, cwd: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    import os
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "gitrag", *args, "--json"], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL, check=False)
    assert proc.returncode in (0, 1), proc.stderr  # doctor exits 1 when a check fails
    assert proc.stdout.count("\n") == 1, f"gitrag {' '.join(args)} --json printed more than one line: {proc.stdout!r}"
    return json.loads(proc.stdout)


@pytest.fixture
def project(repo: Repo, tmp_path: Path) -> Repo:
    repo.write("app/retry.py", 'RETRY_LIMIT = 3\n\n\ndef send_message(text):\n    """Send with retries."""\n'
               '    for attempt in range(RETRY_LIMIT):\n        if deliver(text):\n            return True\n'
               '    return False\n\n\ndef deliver(text):\n    return bool(text)\n')
    repo.write("docs/guide.md", "# Guide\n\nRetries are limited by RETRY_LIMIT.\n")
    repo.write("logo.png", "\x89PNG\r\n\x1a\n\0\0\0binary")  # skipped: binary
    repo.commit("an app")
    return repo


def outputs(project: Repo, tmp_path: Path, daemon_start: Any) -> dict[str, list[dict[str, Any]]]:
    """Real ``--json`` output of every command, several runs each (field sets are unioned)."""
    cwd = project.path
    out: dict[str, list[dict[str, Any]]] = {c: [] for c in COMMANDS}
    out["index"].append(run_json("index", cwd=cwd))
    out["ask"].append(run_json("ask", "send_message retries RETRY_LIMIT", "--expand", "1", cwd=cwd))
    out["ask"].append(run_json("ask", "send_message retries", "--blame", cwd=cwd))
    out["log"].append(run_json("log", "retries", cwd=cwd))
    with OllamaStub() as stub:
        def reply(messages: list[dict[str, Any]]) -> str:
            first = re.search(r"^\[\d+\] (\S+:\d+-\d+)", messages[-1]["content"], re.M)
            return f"It is in {first.group(1) if first else 'app/retry.py:1-1'}; see also nowhere/else.py:1-2."

        stub.chat_reply = reply
        chat = {"GITRAG_CHAT_MODEL": "llama3.2", "GITRAG_OLLAMA_HOST": stub.url}
        out["ask"].append(run_json("ask", "send_message retries RETRY_LIMIT", cwd=cwd, env=chat))
    out["status"].append(run_json("status", cwd=cwd))
    out["gc"].append(run_json("gc", cwd=cwd))
    out["related"].append(run_json("related", "app/retry.py:4", cwd=cwd))
    out["doctor"].append(run_json("doctor", cwd=cwd))
    questions = tmp_path / "questions.jsonl"
    questions.write_text("\n".join(json.dumps(q) for q in [
        {"id": "q1", "kind": "identifier", "query": "send_message", "targets": [
            {"path": "app/retry.py", "symbol": "send_message", "start_line": 4, "end_line": 9}]},
        {"id": "q2", "kind": "concept", "query": "how many times a message is tried", "targets": [
            {"path": "app/retry.py", "symbol": "RETRY_LIMIT", "start_line": 1, "end_line": 1}]},
    ]) + "\n")
    out["eval"].append(run_json("eval", str(questions), cwd=cwd))
    daemon_start()  # the same commands answered by a running daemon
    project.write("app/more.py", "def more():\n    return 1\n")
    project.commit("more")
    out["index"].append(run_json("index", cwd=cwd))
    out["ask"].append(run_json("ask", "more", "--blame", cwd=cwd))
    out["log"].append(run_json("log", "more", "--path", "app/", cwd=cwd))
    out["ask"].append(run_json("ask", "send_message retries", "--files", "--exclude", "docs/**", cwd=cwd))
    out["related"].append(run_json("related", "app/retry.py:4", "-k", "2", cwd=cwd))
    out["status"].append(run_json("status", cwd=cwd))
    out["gc"].append(run_json("gc", cwd=cwd))
    return out


def test_every_documented_field_is_emitted_and_nothing_else(project: Repo, tmp_path: Path, daemons: Any) -> None:
    docs = documented()
    assert set(docs) == set(COMMANDS), f"README documents --json of {sorted(docs)}, expected {sorted(COMMANDS)}"
    real = outputs(project, tmp_path, daemons)
    problems = []
    for command in COMMANDS:
        seen = {p for data in real[command] for p in paths(data)}
        for field in sorted(seen - docs[command]):
            problems.append(f"gitrag {command} --json emits `{field}`: document it in README.md, "
                            f"'### `gitrag {command} --json`'")
        for field in sorted(docs[command] - seen):
            problems.append(f"README.md documents `{field}` for gitrag {command} --json, but no run emitted it")
    assert not problems, "\n".join(problems)


def test_the_parser_sees_every_table() -> None:
    docs = documented()
    assert {"results[].path", "citations.kept[].text"} <= docs["ask"]
    assert {"modes.<mode>.by_kind.<kind>.ndcg@10", "commit"} <= docs["eval"]
    assert "repos[].branches[].name" in docs["status"]


def test_paths_name_nested_fields_and_data_keys() -> None:
    value = {"a": [{"b": 1}], "modes": {"hybrid": {"by_kind": {"concept": {"x": 1}}}}}
    assert set(paths(value)) == {"a", "a[].b", "modes", "modes.<mode>.by_kind", "modes.<mode>.by_kind.<kind>.x"}
