"""Where the user config is read from: ``$XDG_CONFIG_HOME/gitrag/config.toml`` (default
``~/.config/gitrag/config.toml``) or the file ``GITRAG_CONFIG`` names, whatever GITRAG_HOME
says (it holds data, not settings); ``gitrag doctor`` names the file it read."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gitrag.daemon import systemd as unit
from tests.daemonutil import gitrag
from tests.gitutil import Repo


def _committed(repo: Repo) -> Repo:
    repo.write("a.py", "def a():\n    return 1\n")
    repo.commit("a")
    return repo


def _config_check(repo: Repo) -> dict[str, str]:
    proc = gitrag("doctor", "--json", "--repo", str(repo.path), check=False)
    return next(c for c in json.loads(proc.stdout)["checks"] if c["name"] == "config")


@pytest.mark.parametrize("xdg", [False, True], ids=["home-dot-config", "xdg-config-home"])
def test_the_user_config_is_read_with_gitrag_home_set(repo: Repo, isolated_home: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch, xdg: bool) -> None:
    # the tester's case: GITRAG_HOME set, the file where the README says; it was silently ignored (rc 0)
    _committed(repo)
    monkeypatch.delenv("GITRAG_EMBEDDER")
    if xdg:
        monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
        user_config = tmp_path / "xdg" / "gitrag" / "config.toml"
    else:
        monkeypatch.delenv("XDG_CONFIG_HOME")
        user_config = isolated_home / ".config" / "gitrag" / "config.toml"
    assert os.environ["GITRAG_HOME"]
    user_config.parent.mkdir(parents=True)
    user_config.write_text('embedder = "gpt5"\n')
    proc = gitrag("index", "--repo", str(repo.path), check=False)
    assert (proc.returncode, proc.stderr) == (
        1, f"gitrag: error: unknown embedder 'gpt5' (setting 'embedder' in {user_config}); "
           f"choose one of: hash, local, ollama, static\n")
    user_config.write_text('embedder = "hash"\n')
    assert _config_check(repo) == {"name": "config", "status": "ok", "detail": f"read {user_config} (user config)",
                                   "fix": ""}


def test_gitrag_config_names_the_file(repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _committed(repo)
    named = tmp_path / "elsewhere.toml"
    named.write_text("batch_size = 0\n")
    monkeypatch.setenv("GITRAG_CONFIG", str(named))
    proc = gitrag("index", "--repo", str(repo.path), check=False)
    assert (proc.returncode, proc.stderr) == (
        1, f"gitrag: error: setting 'batch_size' in {named} must be a whole number of texts greater than 0, got 0\n")
    named.write_text("batch_size = 8\n")
    repo.write(".gitrag.toml", "max_file_bytes = 5000\n")
    assert _config_check(repo)["detail"] == (f"read {named} (GITRAG_CONFIG); then {repo.path / '.gitrag.toml'}, "
                                             f"environment")


def test_gitrag_config_naming_no_file_is_one_error_line(repo: Repo, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    _committed(repo)
    typo = tmp_path / "confg.toml"
    monkeypatch.setenv("GITRAG_CONFIG", str(typo))
    proc = gitrag("index", "--repo", str(repo.path), check=False)
    assert (proc.returncode, proc.stderr) == (
        1, f"gitrag: error: GITRAG_CONFIG names {typo}, which does not exist; create it or unset GITRAG_CONFIG\n")


def test_a_config_in_gitrag_home_is_ignored_with_one_warning(repo: Repo, isolated_home: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # where an older gitrag read it: not read (GITRAG_HOME is data), but never silently
    _committed(repo)
    monkeypatch.delenv("GITRAG_EMBEDDER")
    home = Path(os.environ["GITRAG_HOME"])
    home.mkdir(parents=True)
    (home / "config.toml").write_text('embedder = "gpt5"\n')
    user_config = isolated_home / ".config" / "gitrag" / "config.toml"
    user_config.parent.mkdir(parents=True)
    user_config.write_text('embedder = "hash"\n')
    proc = gitrag("index", "--repo", str(repo.path), check=False)
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if str(home / "config.toml") in line]
    assert len(warnings) == 1 and f"ignored: settings are read from {user_config}, not from GITRAG_HOME" in warnings[0]
    check = _config_check(repo)
    assert check["status"] == "warn" and check["fix"] == f"mv {home / 'config.toml'} {user_config}"
    assert check["detail"] == (f"{home / 'config.toml'} is not read (GITRAG_HOME holds data, not settings); "
                               f"read {user_config} (user config)")


def test_the_systemd_unit_reads_the_same_user_config(tmp_path: Path) -> None:
    env = {"GITRAG_HOME": str(tmp_path / "h"), "GITRAG_CONFIG": str(tmp_path / "c.toml"),
           "XDG_CONFIG_HOME": str(tmp_path / "x")}
    lines = unit.render("/usr/bin/python3", env).splitlines()
    assert [line for line in lines if line.startswith("Environment=") and "PYTHONUNBUFFERED" not in line] == [
        f"Environment=GITRAG_HOME={tmp_path / 'h'}", f"Environment=GITRAG_CONFIG={tmp_path / 'c.toml'}",
        f"Environment=XDG_CONFIG_HOME={tmp_path / 'x'}"]


def test_the_systemd_unit_makes_relative_settings_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the service starts elsewhere: a relative path must not reach it as written
    lines = unit.render("/usr/bin/python3", {"GITRAG_CONFIG": "conf/c.toml", "GITRAG_HOME": "home"}).splitlines()
    assert f"Environment=GITRAG_CONFIG={tmp_path / 'conf' / 'c.toml'}" in lines
    assert f"Environment=GITRAG_HOME={tmp_path / 'home'}" in lines
