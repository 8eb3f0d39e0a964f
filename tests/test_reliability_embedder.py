"""Embedder faults at the indexer/CLI level (issue 8): the real ``gitrag index`` against the
stand-in Ollama server (tests/ollama_stub.py) with one fault at a time.

Each fault ends in a clear message (exit 1, nothing advanced: the state and the store hold
exactly what they held before) or in a success (retried, bisected, shortened or skipped
with a log line); once the fault clears, one more ``gitrag index`` equals a from-scratch
index of HEAD: 0 points lost or wrong.
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.daemonutil import wait_for
from tests.gitutil import Repo
from tests.ollama_stub import OllamaStub, StubModel
from tests.reliability import indexed_commit, lost_wrong, points, record, run

MARK = "ZQXMARKER"
GROUP = "embedder (Ollama)"


def _functions(prefix: str, n: int) -> str:
    return "\n\n".join(f"def {prefix}_{i}(value):\n    \"\"\"Step {i} of {prefix}.\"\"\"\n    return value * {i} + {i}\n"
                       for i in range(n))


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch) -> Iterator[OllamaStub]:
    with OllamaStub() as server:
        _use(server, monkeypatch)
        monkeypatch.setenv("GITRAG_EMBEDDER", "ollama")
        monkeypatch.setenv("GITRAG_OLLAMA_MODEL", "all-minilm")
        monkeypatch.setenv("GITRAG_OLLAMA_TIMEOUT", "0.5")
        monkeypatch.setenv("GITRAG_BATCH_SIZE", "2")
        yield server


def _use(server: OllamaStub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITRAG_OLLAMA_HOST", server.url)


@pytest.fixture
def pending(repo: Repo, stub: OllamaStub) -> Repo:
    """Commit A indexed; commit B (new and edited files, one chunk holding MARK) not yet."""
    repo.write("pkg/a.py", _functions("alpha", 3))
    repo.write("pkg/b.py", _functions("beta", 2))
    repo.commit("A")
    assert run("index", "--repo", str(repo.path)).returncode == 0
    repo.write("pkg/a.py", _functions("alpha", 4))
    for k in range(10):  # a file is one chunk here: ten more chunks, five batches of two
        repo.write(f"pkg/more_{k}.py", _functions(f"gamma{k}", 2))
    repo.write("pkg/marked.py", f"def marked(value):\n    return '{MARK}' + value\n")
    repo.commit("B")
    return repo


def _index(repo: Repo) -> subprocess.CompletedProcess[str]:
    return run("index", "--json", "--repo", str(repo.path), timeout=60)


def _assert_refused_and_unchanged(repo: Repo, proc: subprocess.CompletedProcess[str], before: object,
                                  message: str) -> None:
    """Exit 1 with a one-line message saying what to do; the index is exactly as before."""
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    assert proc.stdout == "" and message in proc.stderr
    assert indexed_commit(repo.path) == repo.git("rev-parse", "HEAD~1")
    assert points(repo.path) == before


def _converges(repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int, dict[str, object]]:
    proc = _index(repo)
    assert proc.returncode == 0, proc.stderr
    lost, wrong = lost_wrong(repo.path, tmp_path, monkeypatch)
    assert (lost, wrong) == (0, 0)
    assert indexed_commit(repo.path) == repo.head()
    return lost, wrong, json.loads(proc.stdout)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_ollama_not_running(pending: Repo, stub: OllamaStub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = points(pending.path)
    monkeypatch.setenv("GITRAG_OLLAMA_HOST", f"http://127.0.0.1:{_closed_port()}")
    _assert_refused_and_unchanged(pending, _index(pending), before, "ollama serve")
    _use(stub, monkeypatch)
    lost, wrong, _ = _converges(pending, tmp_path, monkeypatch)
    record("Ollama not running", "exit 1: cannot reach Ollama ... start it with `ollama serve`; then converges",
           lost, wrong, GROUP)


def test_model_not_pulled(pending: Repo, stub: OllamaStub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = points(pending.path)
    model = stub.models.pop("all-minilm:latest")
    _assert_refused_and_unchanged(pending, _index(pending), before, "ollama pull all-minilm")
    stub.models["all-minilm:latest"] = model
    lost, wrong, _ = _converges(pending, tmp_path, monkeypatch)
    record("model not pulled (404)", "exit 1: run `ollama pull all-minilm`; then converges", lost, wrong, GROUP)


def test_input_too_long_is_shortened(pending: Repo, stub: OllamaStub, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    stub.max_input_chars = 150  # the longer chunks get 400 "input length exceeds the context length"
    monkeypatch.setenv("GITRAG_HOME", str(tmp_path / "limited"))  # every vector made under the limit
    proc = _index(pending)
    assert proc.returncode == 0 and "ollama input too long; embedded its head" in proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["chunks_failed"] == 0
    lost, wrong = lost_wrong(pending.path, tmp_path, monkeypatch)  # from scratch under the same limit
    assert (lost, wrong) == (0, 0)
    record("input too long (400)", "bisected; the input's head embedded, logged; exit 0", lost, wrong, GROUP)


@pytest.mark.parametrize("fault", ["poison", "nan_marker", "drop_marker"])
def test_one_bad_input_is_skipped_then_retried(pending: Repo, stub: OllamaStub, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch, fault: str) -> None:
    setattr(stub, fault, MARK)
    proc = _index(pending)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["chunks_failed"] == 1 and "ollama input skipped" in proc.stderr
    assert {"path": "pkg/marked.py", "reason": "a chunk failed to embed"} in summary["skipped"]
    stored, manifest = points(pending.path)
    assert set(stored) == set(manifest)  # the store holds what the manifest says, nothing more
    assert not any(MARK in p for p in manifest.values())
    setattr(stub, fault, None)
    lost, wrong, again = _converges(pending, tmp_path, monkeypatch)  # the skipped chunk is retried
    assert again["chunks_embedded"] == 1
    what = {"poison": "a batch failing because of one input (500)", "nan_marker": "NaN in a vector",
            "drop_marker": "fewer vectors than inputs"}[fault]
    record(what, "bisected to the input, skipped with a log line, reported; retried next sync", lost, wrong, GROUP)


def test_server_that_hangs_times_out(pending: Repo, stub: OllamaStub, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    before = points(pending.path)
    stub.delays = [0.0, 0.0, 0.0]  # the probe and two batches answer, then every request hangs
    stub.delay = 60.0
    t0 = time.monotonic()
    _assert_refused_and_unchanged(pending, _index(pending), before, "timed out")
    assert time.monotonic() - t0 < 30
    stub.delay = 0.0
    lost, wrong, again = _converges(pending, tmp_path, monkeypatch)
    assert again["chunks_reused"] > 0  # what was embedded before the hang comes from the cache
    record("server hangs (timeout)", "retried once, then exit 1: Ollama at … timed out (2 tries); converges",
           lost, wrong, GROUP)


def test_server_dies_mid_index(pending: Repo, stub: OllamaStub, tmp_path: Path,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    before = points(pending.path)
    stub.delay = 0.1
    seen = len(stub.embed_requests()) + 4  # the probe and three batches, then the server is gone
    killer = threading.Thread(target=lambda: (wait_for(lambda: len(stub.embed_requests()) >= seen, "4 requests",
                                                       every_s=0.01), stub.close()))
    killer.start()
    proc = _index(pending)
    killer.join()
    _assert_refused_and_unchanged(pending, proc, before, "cannot reach Ollama")
    with OllamaStub() as restarted:
        _use(restarted, monkeypatch)
        lost, wrong, again = _converges(pending, tmp_path, monkeypatch)
    assert again["chunks_reused"] > 0  # batches embedded before it died come from the cache
    record("server dies mid-index", "exit 1: cannot reach Ollama; restarted: converges, cached vectors reused",
           lost, wrong, GROUP)


def test_slow_model_load_and_a_busy_server_are_retried(pending: Repo, stub: OllamaStub, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    stub.unload()
    stub.load_delay = 0.75  # 1.5x the timeout: only the first request after idle may wait this long (2x)
    stub.fail_next = [(503, "server busy")]
    lost, wrong, _ = _converges(pending, tmp_path, monkeypatch)
    record("slow model load after idle; a busy server (503)", "first request after idle waits 2x the timeout; "
           "503 retried; exit 0", lost, wrong, GROUP)


def test_a_file_name_the_model_cannot_embed(pending: Repo, stub: OllamaStub, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    pending.write(f"pkg/{MARK}_named.py", "def plainly_named():\n    return 'fine'\n")
    pending.commit("C: a file whose path text gets NaN")
    stub.nan_marker = MARK
    proc = _index(pending)
    assert proc.returncode == 0, proc.stderr  # was: the whole sync refused, on every run
    stored, manifest = points(pending.path)
    assert set(stored) == set(manifest)
    assert any(f"pkg/{MARK}_named.py" in p for p in manifest.values())  # indexed, without its path vector
    stub.nan_marker = None
    lost, wrong, _ = _converges(pending, tmp_path, monkeypatch)  # the path is embedded on the next sync
    record("a file name the model cannot embed (NaN path vector)", "its points use the chunk vector alone; "
           "the path is retried next sync", lost, wrong, GROUP)


# -- issue 13, item 9: messages that were wrong, and waits that were too long -------------------


@pytest.mark.parametrize("host", ["127.0.0.1:99999", "ftp://127.0.0.1:{port}"])
def test_a_bad_ollama_host_is_refused_at_once(pending: Repo, stub: OllamaStub, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch, host: str) -> None:
    before = points(pending.path)
    monkeypatch.setenv("GITRAG_OLLAMA_HOST", host.format(port=stub.url.rsplit(":", 1)[1]))
    proc = _index(pending)
    _assert_refused_and_unchanged(pending, proc, before, "ollama_host")  # was: exit 3, or 3 tries over 7 s
    assert "ollama request failed" not in proc.stderr and "Traceback" not in proc.stderr
    assert ("port must be a number from 1 to 65535" if "99999" in host else "not ftp://") in proc.stderr
    _use(stub, monkeypatch)
    lost, wrong, _ = _converges(pending, tmp_path, monkeypatch)
    what = "port out of range" if "99999" in host else "an ftp:// URL"
    record(f"GITRAG_OLLAMA_HOST={host.split('{')[0]}… ({what})",
           "exit 1 at once, no retry: says what ollama_host must be; then converges", lost, wrong, GROUP)


def test_a_web_server_that_is_not_ollama(pending: Repo, stub: OllamaStub, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    before = points(pending.path)
    stub.raw_body = b"<html><body>It works!</body></html>"  # a 200 with a body that is not JSON
    proc = _index(pending)
    _assert_refused_and_unchanged(pending, proc, before, "not Ollama's JSON")  # was: exit 3, internal error
    assert "is ollama_host an Ollama server?" in proc.stderr
    stub.raw_body = None
    lost, wrong, _ = _converges(pending, tmp_path, monkeypatch)
    record("a 200 reply that is not JSON (another web server)", "exit 1: answered with something that is not "
           "Ollama's JSON; is ollama_host an Ollama server?; then converges", lost, wrong, GROUP)


def test_a_server_error_on_the_first_request_blames_the_server(pending: Repo, stub: OllamaStub, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    before = points(pending.path)
    stub.fail_next = [(500, "llama runner process has terminated: signal: killed")]  # the probe gets it
    proc = _index(pending)
    _assert_refused_and_unchanged(pending, proc, before, "HTTP 500: llama runner process has terminated")
    assert "cannot embed" not in proc.stderr and "server log" in proc.stderr  # was: the model "cannot embed"
    lost, wrong, _ = _converges(pending, tmp_path, monkeypatch)
    record("HTTP 500 on the first embed request", "exit 1: the server failed (HTTP 500 …), check the server log; "
           "the model is not blamed; then converges", lost, wrong, GROUP)


def test_a_model_whose_vector_size_changes_mid_index(pending: Repo, stub: OllamaStub, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    before = points(pending.path)
    stub.delay = 0.05
    seen = len(stub.embed_requests()) + 3  # the probe and two batches, then the model is replaced
    swap = threading.Thread(target=lambda: (wait_for(lambda: len(stub.embed_requests()) >= seen, "3 requests",
                                                     every_s=0.01),
                                            stub.models.__setitem__("all-minilm:latest", StubModel("bert", 512, 512))))
    swap.start()
    proc = _index(pending)
    swap.join()
    _assert_refused_and_unchanged(pending, proc, before, "`gitrag index --rebuild`")
    assert "gitrag reindex" not in proc.stderr  # was: a command that does not exist
    stub.delay = 0.0
    rebuilt = run("index", "--rebuild", "--json", "--repo", str(pending.path), timeout=60)
    assert rebuilt.returncode == 0, rebuilt.stderr
    lost, wrong, _ = _converges(pending, tmp_path, monkeypatch)
    record("the model's vector size changes mid-index", "exit 1: re-embed with `gitrag index --rebuild` (the "
           "command that exists); after it, converges", lost, wrong, GROUP)


def test_ollama_host_is_honoured_when_gitrag_ollama_host_is_unset(pending: Repo, stub: OllamaStub, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITRAG_OLLAMA_HOST")
    monkeypatch.setenv("OLLAMA_HOST", stub.url.removeprefix("http://"))  # Ollama's own spelling: host:port
    asked = len(stub.embed_requests())
    lost, wrong, _ = _converges(pending, tmp_path, monkeypatch)  # was: refused at 127.0.0.1:11434
    assert len(stub.embed_requests()) > asked
    monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{_closed_port()}")  # GITRAG_OLLAMA_HOST still wins
    _use(stub, monkeypatch)
    pending.write("pkg/late.py", _functions("late", 1))
    pending.commit("C")
    assert _index(pending).returncode == 0
    record("Ollama's OLLAMA_HOST set, GITRAG_OLLAMA_HOST unset", "OLLAMA_HOST honoured (GITRAG_OLLAMA_HOST "
           "and the user config win); converges", lost, wrong, GROUP)


def test_a_hung_server_says_it_waits_and_fails_after_one_retry(pending: Repo, stub: OllamaStub, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    before = points(pending.path)
    monkeypatch.setenv("GITRAG_OLLAMA_TIMEOUT", "2")  # the waiting line comes after a quarter of it
    stub.unload()
    stub.hang = True  # nothing is ever answered
    asked = len(stub.requests)
    proc = _index(pending)
    _assert_refused_and_unchanged(pending, proc, before, "timed out")
    assert "waiting for Ollama at" in proc.stderr and "gives up after" in proc.stderr  # was: silence
    assert len(stub.requests) - asked == 2  # one try and one retry (was three tries)
    stub.hang = False
    lost, wrong, _ = _converges(pending, tmp_path, monkeypatch)
    record("server accepts but never answers", "a 'waiting for Ollama … gives up after N s' line after 5 s (a "
           "quarter of the timeout); one retry, then exit 1 (timed out); defaults: about 90 s, was 308 s",
           lost, wrong, GROUP)
