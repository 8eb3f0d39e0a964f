"""A running daemon follows the repository's ``.gitrag.toml`` as it changes (a commit adds,
edits or removes it), so a command answers the same through the daemon as without one:
the settings are read again for each sync and ask, never kept from when the daemon first
opened the repository. An unknown embedder name is refused before any daemon is asked.

Real repositories, a real daemon over its unix socket, the Ollama stub for ``ollama``.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from gitrag.errors import ConfigError
from tests.daemonutil import gitrag, stop_daemon
from tests.gitutil import Repo
from tests.ollama_stub import OllamaStub

BIG = "".join(f"def function_number_{i}(value):\n    return value * {i} + {i}\n\n" for i in range(8))


def _project(repo: Repo) -> None:
    """Four files larger than 100 bytes and one smaller."""
    for name in ("alpha", "beta", "gamma", "delta"):
        repo.write(f"{name}.py", BIG.replace("function_number", f"{name}_step"))
    repo.write("tiny.py", "X = 1\n")
    repo.commit("code")


def _index(repo: Repo) -> dict[str, Any]:
    proc = gitrag("index", "--json", "--repo", str(repo.path))
    return json.loads(proc.stdout)


def _skipped_large(summary: dict[str, Any]) -> int:
    return sum(1 for s in summary["skipped"] if s["reason"].startswith("larger than"))


def _ask_paths(repo: Repo, question: str) -> list[str]:
    proc = gitrag("ask", question, "--no-answer", "--json", "--repo", str(repo.path))
    return [r["path"] for r in json.loads(proc.stdout)["results"]]


def test_a_daemon_follows_a_committed_gitrag_toml(repo: Repo, daemon: subprocess.Popen[bytes]) -> None:
    _project(repo)
    first = _index(repo)
    assert _skipped_large(first) == 0 and first["files_indexed"] == 5
    repo.write(".gitrag.toml", "max_file_bytes = 100\n")
    repo.commit("small files only")
    shrunk = _index(repo)  # the daemon had the repository open with the defaults: it reads the file again
    assert _skipped_large(shrunk) == 4, shrunk["skipped"]
    assert "alpha.py" not in _ask_paths(repo, "alpha_step")
    repo.git("rm", "-q", ".gitrag.toml")
    repo.commit("back to the defaults")
    grown = _index(repo)
    assert _skipped_large(grown) == 0, grown["skipped"]
    assert _ask_paths(repo, "alpha_step")[0] == "alpha.py"
    status = json.loads(gitrag("status", "--json", "--repo", str(repo.path)).stdout)
    assert "larger than max_file_bytes" not in status["repos"][0]["branches"][0]["skipped"]
    repo.write(".gitrag.toml", "max_file_bytes = 100\n")  # added again: followed again
    repo.commit("small files only, again")
    assert _skipped_large(_index(repo)) == 4


def _status_embedder(repo: Repo) -> str:
    return str(json.loads(gitrag("status", "--json", "--repo", str(repo.path)).stdout)["embedder"]["name"])


def _embedder_check(repo: Repo) -> dict[str, Any]:
    doctor = json.loads(gitrag("doctor", "--json", "--repo", str(repo.path), check=False).stdout)
    return next(c for c in doctor["checks"] if c["name"] == "embedder")


def test_the_committed_embedder_is_the_one_used_daemon_or_not(repo: Repo, daemons: Any,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """``embedder = "ollama"`` committed while the daemon has the repository open: status, ask
    and doctor agree on it, with the daemon and without one; a dead Ollama is one line
    naming it, the same both ways."""
    monkeypatch.delenv("GITRAG_EMBEDDER")  # the repository's file chooses, as the README's table says
    monkeypatch.setenv("GITRAG_OLLAMA_MODEL", "all-minilm")
    monkeypatch.setenv("GITRAG_OLLAMA_TIMEOUT", "2")
    monkeypatch.setenv("GITRAG_AUTOSTART", "0")
    with OllamaStub() as stub:
        monkeypatch.setenv("GITRAG_OLLAMA_HOST", stub.url)
        _project(repo)
        proc = daemons()
        assert _status_embedder(repo) == "static"  # the daemon opened the repository with the default
        repo.write(".gitrag.toml", 'embedder = "ollama"\n')
        repo.commit("embed with ollama")
        assert _status_embedder(repo) == "ollama"
        assert _index(repo)["files_indexed"] == 6
        assert any(r.path == "/api/embed" for r in stub.requests)  # embedded by Ollama, not the daemon's default
        served = _ask_paths(repo, "alpha_step")
        assert served[0] == "alpha.py"
        assert _embedder_check(repo)["status"] == "ok"
        stop_daemon(proc)
        assert _status_embedder(repo) == "ollama"  # no daemon: the same
        assert _ask_paths(repo, "alpha_step") == served
    # Ollama is gone (the stub stopped): one line naming it, without the daemon and with it
    errors = []
    for with_daemon in (False, True):
        if with_daemon:
            daemons()
        ask = gitrag("ask", "alpha_step", "--no-answer", "--repo", str(repo.path), check=False)
        assert ask.returncode == 1 and len(ask.stderr.strip().splitlines()) == 1, ask.stderr
        assert "cannot reach Ollama" in ask.stderr, ask.stderr
        errors.append(ask.stderr)
        check = _embedder_check(repo)
        assert check["status"] == "fail" and "Ollama" in check["detail"], check
        assert _status_embedder(repo) == "ollama"
    assert errors[0] == errors[1]
    # another embedder committed while the daemon runs: the index of the old one is refused, then rebuilt
    repo.write(".gitrag.toml", 'embedder = "hash"\n')
    repo.commit("embed with hash")
    assert _status_embedder(repo) == "hash"
    ask = gitrag("ask", "alpha_step", "--no-answer", "--repo", str(repo.path), check=False)
    assert ask.returncode == 1 and "gitrag index --rebuild" in ask.stderr, ask.stderr
    rebuilt = json.loads(gitrag("index", "--rebuild", "--json", "--repo", str(repo.path)).stdout)
    assert rebuilt["files_indexed"] == 6
    assert _ask_paths(repo, "alpha_step")[0] == "alpha.py"


@pytest.mark.parametrize("daemon_runs", [False, True])
def test_an_unknown_embedder_is_refused_before_any_daemon(repo: Repo, daemons: Any, daemon_runs: bool,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    _project(repo)
    _index(repo)
    if daemon_runs:
        daemons()
    monkeypatch.setenv("GITRAG_EMBEDDER", "bogus")
    for args in (("ask", "x"), ("index",), ("status",)):
        proc = gitrag(*args, "--repo", str(repo.path), check=False)
        assert (proc.returncode, proc.stderr) == (
            1, "gitrag: error: unknown embedder 'bogus' (GITRAG_EMBEDDER); choose one of: hash, local, ollama, "
               "static\n"), args


def test_an_unknown_embedder_in_the_repository_file_is_a_broken_file(repo: Repo,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A committed ``embedder = "bogus"`` is a value out of range like any other: the file is
    ignored whole (one warning naming it), the rest of the settings go on."""
    from gitrag import config
    from gitrag.index.embedders import available

    assert available() == config.embedder_names() and set(config.EMBEDDERS) <= set(available())
    monkeypatch.delenv("GITRAG_EMBEDDER")
    repo.write(".gitrag.toml", 'max_file_bytes = 100\nembedder = "bogus"\n')
    settings = config.load_settings(repo.path)
    assert (settings.embedder, settings.max_file_bytes) == ("static", 1_000_000)
    assert settings.problems == (f"unknown embedder 'bogus' (setting 'embedder' in {repo.path / '.gitrag.toml'} "
                                 f"line 2); choose one of: hash, local, ollama, static; the file is ignored "
                                 f"(defaults used) until it is fixed",)
    monkeypatch.setenv("GITRAG_EMBEDDER", "bogus")
    with pytest.raises(ConfigError, match=r"^unknown embedder 'bogus' \(GITRAG_EMBEDDER\); choose one of: hash, local"):
        config.load_settings(repo.path)
