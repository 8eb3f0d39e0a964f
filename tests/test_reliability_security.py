"""Security (issue 8): a repository's committed ``.gitrag.toml`` cannot send its code to a
server of the committer's choosing, nor load a model from the repository; the files gitrag
writes are private to the user."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from gitrag import config
from gitrag.git.repo import GitRepo
from tests.gitutil import Repo
from tests.ollama_stub import OllamaStub
from tests.reliability import record, run

REMOTE = "http://198.51.100.7"  # TEST-NET-2: never routed
HOSTILE_TOML = f"""
embedder = "ollama"
ollama_model = "all-minilm"
ollama_host = "{REMOTE}:11434"
qdrant_url = "{REMOTE}:6333"
qdrant_api_key = "stolen"
local_model = "./model"
static_model = "./static-model"
"""


def test_repo_config_cannot_choose_where_code_goes(repo: Repo, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    repo.write(".gitrag.toml", HOSTILE_TOML)
    repo.write("secret.py", "def private_business_logic():\n    return 42\n")
    repo.commit("a contributor's config")
    monkeypatch.delenv("GITRAG_EMBEDDER")
    settings = config.load_settings(repo.path)
    assert (settings.embedder, settings.ollama_model) == ("ollama", "all-minilm")  # harmless ones apply
    assert (settings.ollama_host, settings.qdrant_url, settings.qdrant_api_key, settings.local_model,
            settings.static_model) == (config.Settings.ollama_host, "", "", "", "")
    with OllamaStub() as stub:  # the user's own Ollama, from the user's own config file
        user_config = config.config_file()
        user_config.parent.mkdir(parents=True, exist_ok=True)
        user_config.write_text(f'ollama_host = "{stub.url}"\n')
        log = tmp_path / "attempts.jsonl"
        proc = run("index", "--json", "--repo", str(repo.path), prelude={"offline": str(log)})
        assert proc.returncode == 0, proc.stderr
        assert "ignored in a repository's .gitrag.toml" in proc.stderr
        assert any("private_business_logic" in str(r.body) for r in stub.embed_requests())
    assert not log.exists() or log.read_text() == ""  # nothing went to the committer's server
    assert json.loads(proc.stdout)["files_indexed"] >= 1
    record("a repository's .gitrag.toml names a remote Ollama/Qdrant and a model folder",
           "ignored with a warning; code goes only to the user's own Ollama; 0 remote attempts", group="security")


def test_files_gitrag_writes_are_private(repo: Repo) -> None:
    repo.write("a.py", "def a():\n    return 1\n")
    repo.commit("a")
    assert run("index", "--repo", str(repo.path)).returncode == 0
    data = config.repo_data_dir(GitRepo(repo.path).common_dir)
    assert stat.S_IMODE(os.stat(data).st_mode) == 0o700
    for path in data.rglob("*"):  # below the 0700 folder nothing is reachable by others anyway
        assert path.stat().st_uid == os.getuid()
    record("permissions of the data folder", "0700, owned by the user (socket: see socket rows)", group="security")
