"""Every number setting, from the environment or a config file, is judged the same way: a
value that is not one it allows is one error line naming the setting, the value and what is
allowed (exit 1); and a relative GITRAG_HOME is refused (an empty one counts as unset)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gitrag import config
from gitrag.errors import ConfigError
from tests.gitutil import Repo

NUMBERS = {  # field -> (environment variable, what the error says is allowed)
    "max_file_bytes": ("GITRAG_MAX_FILE_BYTES", "a whole number of bytes greater than 0"),
    "batch_size": ("GITRAG_BATCH_SIZE", "a whole number of texts greater than 0"),
    "ollama_timeout": ("GITRAG_OLLAMA_TIMEOUT", "a number of seconds greater than 0 and at most 86400"),
    "branch_ttl_days": ("GITRAG_BRANCH_TTL_DAYS", "a number of days greater than 0 and at most 36500"),
    "team_lease_seconds": ("GITRAG_TEAM_LEASE_SECONDS", "a number of seconds greater than 0 and at most 86400"),
}
BAD_TEXT = ("abc", "-5", "0", "1e999", "inf", "-inf", "nan")
WORKERS = "GITRAG_INDEX_WORKERS must be a whole number of worker processes, 0 or more (0 or 1: none), got "


def _gitrag(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gitrag", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL, env={**os.environ, **env})


def test_every_number_setting_covered_here_is_every_number_field() -> None:
    numeric = {f.name for f in dataclasses.fields(config.Settings) if f.type in ("int", "float")}
    assert numeric == set(NUMBERS)


@pytest.mark.parametrize("name", sorted(NUMBERS))
def test_a_bad_number_in_the_environment_is_refused(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    var, allowed = NUMBERS[name]
    extra = ("2.5", "1e3") if name in ("max_file_bytes", "batch_size") else ("100000",)
    for bad in (*BAD_TEXT, *extra):
        monkeypatch.setenv(var, bad)
        with pytest.raises(ConfigError) as caught:
            config.load_settings()
        assert str(caught.value) == f"{var} must be {allowed}, got {bad!r}"


@pytest.mark.parametrize("name", sorted(NUMBERS))
def test_a_bad_number_in_a_config_file_is_refused(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _var, allowed = NUMBERS[name]
    named = tmp_path / "config.toml"
    monkeypatch.setenv("GITRAG_CONFIG", str(named))
    whole = name in ("max_file_bytes", "batch_size")
    for bad, shown in (("true", True), ("-5", -5), ("0", 0), ("inf", float("inf")), ("nan", None), ('"abc"', "abc"),
                       *((("2.5", 2.5),) if whole else ())):
        named.write_text(f"{name} = {bad}\n")
        with pytest.raises(ConfigError) as caught:
            config.load_settings()
        message = str(caught.value)
        assert message.startswith(f"setting {name!r} in {named} must be {allowed}, got "), message
        if shown is not None:
            assert message.endswith(f"got {shown!r}"), message


def test_good_numbers_are_read_as_the_settings_type(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    named = tmp_path / "config.toml"
    named.write_text("batch_size = 8.0\nbranch_ttl_days = 2\nmax_file_bytes = \"5000\"\n")
    monkeypatch.setenv("GITRAG_CONFIG", str(named))
    monkeypatch.setenv("GITRAG_OLLAMA_TIMEOUT", "0.5")
    monkeypatch.setenv("GITRAG_INDEX_WORKERS", "0")
    settings = config.load_settings()
    assert (settings.batch_size, settings.branch_ttl_days, settings.max_file_bytes, settings.ollama_timeout) == (
        8, 2.0, 5000, 0.5)
    assert type(settings.batch_size) is int and type(settings.branch_ttl_days) is float
    assert config.index_workers() == 0


def test_bad_index_workers_are_one_line_in_every_command(repo: Repo) -> None:
    repo.write("a.py", "def a():\n    return 1\n")
    repo.commit("one")
    for bad in ("abc", "-5", "2.5", "1e999"):
        for command in (["index"], ["status", "--json"], ["ask", "a"]):
            done = _gitrag(*command, cwd=repo.path, GITRAG_INDEX_WORKERS=bad)
            assert (done.returncode, done.stdout, done.stderr) == (1, "", f"gitrag: error: {WORKERS}{bad!r}\n"), command


def test_a_relative_gitrag_home_is_refused_and_creates_nothing(repo: Repo) -> None:
    repo.write("a.py", "def a():\n    return 1\n")
    repo.commit("one")
    for command in (["index"], ["status", "--json"], ["ask", "a"], ["install"]):
        done = _gitrag(*command, cwd=repo.path, GITRAG_HOME="relhome")
        assert done.returncode == 1 and done.stdout == "", (command, done.stderr)
        assert done.stderr == ("gitrag: error: GITRAG_HOME must be an absolute folder, got 'relhome' (the daemon "
                               "and the hooks would resolve a relative one elsewhere); set an absolute path or "
                               "unset it\n"), command
    assert not (repo.path / "relhome").exists()
    assert repo.git("status", "--porcelain") == ""


def test_an_empty_gitrag_home_is_unset(repo: Repo, tmp_path: Path) -> None:
    """As for the XDG folders: the default folders below HOME (documented in the README)."""
    repo.write("a.py", "def a():\n    return 1\n")
    repo.commit("one")
    user = tmp_path / "user"
    user.mkdir()
    done = _gitrag("index", cwd=repo.path, GITRAG_HOME="", HOME=str(user), XDG_DATA_HOME="", XDG_STATE_HOME="")
    assert done.returncode == 0, done.stderr
    assert (user / ".local" / "share" / "gitrag").is_dir()


def test_a_bad_ask_wait_is_refused_like_the_others(repo: Repo) -> None:
    repo.write("a.py", "def a():\n    return 1\n")
    repo.commit("one")
    assert _gitrag("index", cwd=repo.path).returncode == 0
    for bad in ("abc", "-1", "nan", "1e999", "inf"):
        done = _gitrag("ask", "a", cwd=repo.path, GITRAG_ASK_WAIT=bad)
        assert (done.returncode, done.stdout, done.stderr) == (
            1, "", f"gitrag: error: GITRAG_ASK_WAIT must be a number of seconds, 0 or more (over 600 counts as "
                   f"600), got {bad!r}\n"), bad
    assert _gitrag("ask", "a", cwd=repo.path, GITRAG_ASK_WAIT="0").returncode == 0
