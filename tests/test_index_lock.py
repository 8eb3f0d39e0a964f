"""In-process ``gitrag index`` as real processes, with no daemon, held in the middle of a
sync by an Ollama stub that leaves requests unanswered.

Two of one repository: the second must see at once that the first is there (the
repository's index lock, :mod:`gitrag.index.lock`), say so naming its pid, wait for it,
and then index. Ctrl-C (SIGINT) part way: one line saying nothing is lost, exit 130, and
the next index embeds only what the interrupted one had not.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest

from tests.gitutil import Repo
from tests.ollama_stub import OllamaStub

SAFETY_S = 120.0  # a deadline against hanging forever on a broken build, never a measurement


def _start(repo: Repo, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "gitrag", "index", *args], cwd=repo.path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _lines(stream: object) -> queue.Queue[str | None]:
    """The stream's lines, read by a thread (None at its end)."""
    q: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        for line in stream:
            q.put(line)
        q.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return q


def _wait_for_line(q: queue.Queue[str | None], needle: str) -> tuple[str, list[str]]:
    seen: list[str] = []
    deadline = time.monotonic() + SAFETY_S
    while time.monotonic() < deadline:
        try:
            line = q.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            break
        if line is None:
            break
        seen.append(line)
        if needle in line:
            return line, seen
    pytest.fail(f"no line with {needle!r} on stderr; saw: {seen!r}")


@pytest.fixture
def project(repo: Repo) -> Repo:
    for i in range(5):
        repo.write(f"pkg/mod{i}.py", f"def handler_{i}(request):\n    return request.get('value_{i}')\n")
    repo.commit("five modules")
    return repo


@pytest.fixture
def stub() -> OllamaStub:
    with OllamaStub() as s:
        yield s


def _env(stub: OllamaStub) -> dict[str, str]:
    return {**os.environ, "GITRAG_EMBEDDER": "ollama", "GITRAG_OLLAMA_HOST": stub.url,
            "GITRAG_OLLAMA_MODEL": "all-minilm", "GITRAG_OLLAMA_TIMEOUT": "600", "GITRAG_PROGRESS_INTERVAL": "off"}


def _held_by_first(project: Repo, stub: OllamaStub) -> subprocess.Popen[str]:
    """A first ``gitrag index`` that is inside its sync (it has asked the embedder) and stays there."""
    stub.hang = True
    first = _start(project, _env(stub))
    deadline = time.monotonic() + SAFETY_S
    while not stub.requests and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert stub.requests and first.poll() is None, first.communicate()
    return first


def test_second_index_waits_for_the_first_and_names_it(project: Repo, stub: OllamaStub) -> None:
    first = _held_by_first(project, stub)
    asked = len(stub.requests)  # the first's, hung: from here on any new request is the second's
    second = _start(project, _env(stub), "--json")
    try:
        errors = _lines(second.stderr)
        line, _ = _wait_for_line(errors, "is indexing this repository")
        assert line.strip() == f"another gitrag index (pid {first.pid}) is indexing this repository; waiting"
        assert "daemon" not in line
        assert second.poll() is None  # waiting, before any work: not one request of its own
        assert len(stub.requests) == asked

        stub.hang = False
        first.send_signal(signal.SIGINT)
        assert first.wait(timeout=SAFETY_S) == 130
        out = second.stdout.read()
        assert second.wait(timeout=SAFETY_S) == 0
        summary = json.loads(out)
        assert summary["files_indexed"] == 5 and summary["chunks_total"] > 0
    finally:
        for proc in (first, second):
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_ctrl_c_says_nothing_is_lost_and_the_next_index_goes_on(project: Repo, stub: OllamaStub) -> None:
    env = {**_env(stub), "GITRAG_BATCH_SIZE": "1"}  # one chunk an embed request
    stub.delays = [0.0, 0.0, 0.0]  # the dimension probe and two chunks answered, the next held until Ctrl-C
    stub.delay = 3600.0
    first = _start(project, env, "--json")
    try:
        deadline = time.monotonic() + SAFETY_S
        while len(stub.embed_requests()) < 4 and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(stub.embed_requests()) >= 4, first.communicate()
        first.send_signal(signal.SIGINT)
        out, err = first.communicate(timeout=SAFETY_S)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode == 130 and out == ""
    assert err.strip().splitlines()[-1:] == [(
        "gitrag: interrupted; nothing is lost: the next `gitrag index` (or the daemon's next sync) continues "
        "from what this one did, without embedding it again")]

    stub.delay = 0.0
    again = subprocess.run([sys.executable, "-m", "gitrag", "index", "--json"], cwd=project.path, env=env,
                           capture_output=True, text=True, timeout=SAFETY_S)
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)
    assert summary["files_indexed"] == 5 and summary["chunks_reused"] >= 2  # the two embedded before Ctrl-C
    assert summary["chunks_embedded"] + summary["chunks_reused"] == summary["chunks_total"]
