"""The CLI's log records: one house line each on stderr (``gitrag: warning: ...``, as errors are
``gitrag: error: ...``), never structlog's own ``2026-...Z [warning  ] ...`` lines among the
command's output; every record also in ``gitrag.log`` in the state folder. Real commands in
a real repository with real warnings."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest

from gitrag import config, logs
from tests.daemonutil import gitrag
from tests.gitutil import Repo


def _repository_with_a_warning(repo: Repo) -> None:
    """A repository whose .gitrag.toml sets a user-only setting (ignored with a warning), with
    a binary and a minified file (skipped, each with its reason)."""
    repo.write("app.py", "def compute_invoice_total(items):\n    return sum(i.price for i in items)\n")
    repo.write("blob.bin", bytes(range(256)) * 8)
    repo.write("web/app.min.js", "var a=1;" * 4000)
    repo.write(".gitrag.toml", 'ollama_host = "http://192.0.2.1:11434"\n')
    repo.commit("first")


def test_warnings_are_house_lines_and_go_to_the_log_file(repo: Repo) -> None:
    _repository_with_a_warning(repo)
    proc = gitrag("index", "--repo", str(repo.path))
    lines = proc.stderr.splitlines()
    assert lines == [f"gitrag: warning: ignored in a repository's .gitrag.toml; set it in your own config or "
                     f"GITRAG_* variables (file={repo.path / '.gitrag.toml'}, settings=['ollama_host'])"], lines
    assert "skipped     1  binary" in proc.stdout and "skipped     1  minified" in proc.stdout
    log = logs.log_file()
    assert log.parent == config.state_dir() and stat.S_IMODE(os.stat(log).st_mode) == 0o600
    text = log.read_text()
    assert "[warning] ignored in a repository's .gitrag.toml" in text and "settings=['ollama_host']" in text
    assert "[info] synced" in text  # info records are logged, though not shown without -v


def test_verbose_shows_info_records_as_house_lines(repo: Repo) -> None:
    _repository_with_a_warning(repo)
    proc = gitrag("-v", "index", "--json", "--repo", str(repo.path))
    json.loads(proc.stdout)  # stdout stays the one JSON document
    lines = proc.stderr.splitlines()
    assert lines and all(line.startswith(("gitrag: warning: ", "gitrag: info: ")) for line in lines), lines
    assert any(line.startswith("gitrag: info: synced (") for line in lines), lines


def test_a_log_file_that_cannot_be_written_fails_nothing(repo: Repo) -> None:
    _repository_with_a_warning(repo)
    state = config.state_dir()
    state.mkdir(parents=True, exist_ok=True)
    logs.log_file().mkdir()  # a folder where the file would be: appending fails
    proc = gitrag("status", "--repo", str(repo.path))
    assert proc.stderr.startswith("gitrag: warning: ignored in a repository's .gitrag.toml")
    assert "Traceback" not in proc.stderr


def test_the_daemon_keeps_its_own_log_format() -> None:
    """``gitrag daemon`` logs structlog's lines (with timestamps) to its stderr: daemon.log or the journal."""
    code = ("import sys; from gitrag import logs; logs.configure('info', json_lines=True)\n"
            "import structlog; structlog.get_logger('t').warning('w', k=1)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    record = json.loads(proc.stderr)
    assert record["event"] == "w" and record["level"] == "warning" and "timestamp" in record


def test_an_ollama_that_fails_some_inputs_warns_in_house_lines(repo: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real HTTP server speaking Ollama's JSON refuses every batch holding one chunk (500):
    gitrag retries, skips that input and says so; each warning is one ``gitrag: warning:``
    line among the command's own output, none in structlog's format."""
    from tests.ollama_stub import OllamaStub

    repo.write("app.py", "def compute_invoice_total(items):\n    return sum(i.price for i in items)\n")
    repo.write("bad.py", "def poisoned():\n    return 'POISONED_INPUT'\n")
    repo.commit("first")
    with OllamaStub() as stub:
        stub.poison = "POISONED_INPUT"
        for var, value in (("GITRAG_EMBEDDER", "ollama"), ("GITRAG_OLLAMA_MODEL", "all-minilm"),
                           ("GITRAG_OLLAMA_HOST", stub.url), ("GITRAG_OLLAMA_TIMEOUT", "2")):
            monkeypatch.setenv(var, value)
        proc = gitrag("index", "--repo", str(repo.path), check=False)
    lines = proc.stderr.splitlines()
    assert any(line.startswith("gitrag: warning: ollama input skipped (") for line in lines), proc.stderr
    assert all(line.startswith("gitrag: ") for line in lines), proc.stderr
    assert "[warning" not in proc.stderr and "Z [" not in proc.stderr
    assert "ollama input skipped" in logs.log_file().read_text()
