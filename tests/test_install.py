"""`gitrag install` / `uninstall`: idempotent, reversible, never losing someone else's hook."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gitrag.daemon import client, registry
from gitrag.daemon import systemd as unit
from gitrag.git import hooks as install
from gitrag.git.repo import GitRepo
from tests.daemonutil import gitrag, gitrag_json, indexed_at, wait_for
from tests.gitutil import Repo


def _snapshot(folder: Path) -> dict[str, tuple[bytes, int, int]]:
    """name -> (content, mode, mtime_ns) of every file in ``folder``."""
    return {p.name: (p.read_bytes(), p.stat().st_mode, p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


def _marker_hook(path: Path, marker: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho \"$(basename \"$0\") $*\" >> {marker}\n")
    path.chmod(0o755)


def _commit_seen(repo: Repo, marker: Path, name: str) -> str:
    """Commit a new file; wait until the user's hook wrote its line; returns HEAD."""
    before = marker.read_text().count("\n") if marker.exists() else 0
    repo.write(f"{name}.py", f"def {name}():\n    return 1\n")
    head = repo.commit(name)
    wait_for(lambda: marker.exists() and marker.read_text().count("\n") > before, "the user's hook to run")
    return head


def test_install_keeps_an_existing_hook_is_idempotent_and_uninstall_restores(
    repo: Repo, daemon: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    hooks, marker = repo.path / ".git" / "hooks", tmp_path / "marker"
    repo.write("a.py", "x = 1\n")
    repo.commit("first")
    _marker_hook(hooks / "post-commit", marker)
    original = _snapshot(hooks)

    out = gitrag("install", "--no-systemd", "--repo", str(repo.path))
    assert "post-commit.legacy" in out.stdout
    installed = _snapshot(hooks)
    assert installed["post-commit.legacy"][0] == original["post-commit"][0]
    assert all(install.is_ours(hooks / n) for n in install.HOOKS)

    again = gitrag("install", "--no-systemd", "--repo", str(repo.path))
    assert _snapshot(hooks) == installed  # byte for byte, mode and mtime
    assert "already installed" in again.stdout

    head = _commit_seen(repo, marker, "after_install")  # the user's hook still runs ...
    wait_for(lambda: indexed_at(repo.path, head), "gitrag's hook to work too")  # ... and so does ours

    gitrag("uninstall", "--repo", str(repo.path))
    assert {k: v[:2] for k, v in _snapshot(hooks).items()} == {k: v[:2] for k, v in original.items()}
    assert not registry.load()
    _commit_seen(repo, marker, "after_uninstall")
    wait_for(lambda: daemon.poll() is not None, "the daemon to stop: no repository left")


def test_a_global_hooks_path_is_used_the_same_way(
    repo: Repo, daemon: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    shared, marker = tmp_path / "global-hooks", tmp_path / "marker"
    _marker_hook(shared / "post-commit", marker)
    repo.git("config", "--global", "core.hooksPath", str(shared))
    repo.write("a.py", "x = 1\n")
    repo.commit("first")
    original = _snapshot(shared)

    out = gitrag("install", "--no-systemd", "--repo", str(repo.path))
    assert "core.hooksPath (global config)" in out.stderr
    assert all(install.is_ours(shared / n) for n in install.HOOKS)
    assert not (repo.path / ".git" / "hooks" / "post-commit").exists()
    head = _commit_seen(repo, marker, "global")
    wait_for(lambda: indexed_at(repo.path, head), "the commit to be indexed through the shared folder")
    assert gitrag_json("doctor", "--repo", str(repo.path))["checks"][1]["status"] == "ok"

    gitrag("uninstall", "--repo", str(repo.path))
    assert {k: v[:2] for k, v in _snapshot(shared).items()} == {k: v[:2] for k, v in original.items()}
    _commit_seen(repo, marker, "after_uninstall")


def test_a_project_hooks_path_is_explained_not_written(repo: Repo, tmp_path: Path) -> None:
    project_hooks = repo.path / ".githooks"
    _marker_hook(project_hooks / "post-commit", tmp_path / "marker")
    repo.git("config", "core.hooksPath", ".githooks")
    repo.write("a.py", "x = 1\n")
    repo.commit("first")
    before = _snapshot(project_hooks)
    target = install.find_target(GitRepo(repo.path))
    assert target.folder == (repo.path / ".git" / install.PRIVATE_DIR).resolve()
    assert target.explain == project_hooks.resolve()
    install.install_hooks(target)
    assert _snapshot(project_hooks) == before  # the project's folder is not touched
    lines = install.explain(target)
    assert len(lines) == len(install.HOOKS) and lines[0].startswith(f"{project_hooks.resolve() / 'post-commit'}:")
    with (project_hooks / "post-commit").open("a") as fh:
        fh.write(install.call_line(target, "post-commit") + "\n")
    assert len(install.explain(target)) == len(install.HOOKS) - 1


def test_husky_folder_is_recognised(repo: Repo) -> None:
    (repo.path / ".husky" / "_").mkdir(parents=True)
    repo.git("config", "core.hooksPath", ".husky/_")
    target = install.find_target(GitRepo(repo.path))
    assert target.explain == (repo.path / ".husky").resolve()


def test_worktrees_and_submodules_use_the_common_git_dir(repo: Repo, tmp_path: Path) -> None:
    repo.write("a.py", "x = 1\n")
    repo.commit("first")
    wt = tmp_path / "wt"
    repo.git("worktree", "add", "-q", str(wt), "-b", "wt")
    assert (wt / ".git").is_file()
    assert install.find_target(GitRepo(wt)).folder == (repo.path / ".git" / "hooks").resolve()

    sub = Repo(tmp_path / "sub")
    sub.write("s.py", "y = 1\n")
    sub.commit("sub")
    repo.git("-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub.path), "vendored")
    assert (repo.path / "vendored" / ".git").is_file()
    target = install.find_target(GitRepo(repo.path / "vendored"))
    assert target.folder == (repo.path / ".git" / "modules" / "vendored" / "hooks").resolve()


def test_refuses_to_overwrite_a_foreign_hook_and_its_legacy(repo: Repo, tmp_path: Path) -> None:
    hooks = repo.path / ".git" / "hooks"
    _marker_hook(hooks / "post-merge", tmp_path / "m")
    _marker_hook(hooks / "post-merge.legacy", tmp_path / "m")
    proc = gitrag("install", "--no-systemd", "--no-index", "--repo", str(repo.path), check=False)
    assert proc.returncode == 1 and "post-merge.legacy exists too" in proc.stderr


def test_install_starts_a_daemon_when_none_runs(repo: Repo) -> None:
    repo.write("a.py", "def first():\n    return 1\n")
    head = repo.commit("first")
    proc = gitrag("install", "--no-systemd", "--repo", str(repo.path))
    try:
        assert "started the gitrag daemon" in proc.stderr and "docs/daemon.md" in proc.stderr
        assert f"indexed main @ {head[:12]}" in proc.stdout
        assert client.probe()["running"]
        report = gitrag_json("doctor", "--repo", str(repo.path))
        assert report["ok"], report
    finally:
        gitrag("daemon", "--stop")
    assert not client.probe()["running"]
    report = json.loads(gitrag("doctor", "--json", "--repo", str(repo.path), check=False).stdout)
    assert {c["name"]: c["status"] for c in report["checks"]}["daemon"] == "fail" and not report["ok"]


def test_unit_renders_the_interpreter_and_home() -> None:
    text = unit.render("/opt/py/bin/python", {"GITRAG_HOME": "/srv/g"})
    assert "ExecStart=/opt/py/bin/python -m gitrag daemon\n" in text
    assert "Environment=GITRAG_HOME=/srv/g\n" in text and text.rstrip().endswith(unit.MARK)


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze is missing: `apt-get install -y systemd` provides it")
def test_systemd_analyze_accepts_the_unit(tmp_path: Path, runtime_dir: Path) -> None:
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime_dir)}
    template = Path(__file__).resolve().parents[1] / "systemd" / unit.UNIT
    rendered = tmp_path / "user" / unit.UNIT
    rendered.parent.mkdir()
    rendered.write_text(unit.render(sys.executable))
    for path in (template, rendered):
        proc = subprocess.run(["systemd-analyze", "--user", "verify", str(path)], env=env,
                              capture_output=True, text=True)
        assert proc.returncode == 0 and not (proc.stdout + proc.stderr).strip(), proc.stdout + proc.stderr


def test_doctor_explains_ollama_problems_with_the_fix() -> None:
    import http.server
    import threading
    from dataclasses import replace

    from gitrag.config import Settings
    from gitrag.surfaces.commands.doctor import check_embedder

    models: list[str] = []

    class Tags(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps({"models": [{"name": m} for m in models]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Tags)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        host = f"http://127.0.0.1:{server.server_port}"
        settings = replace(Settings(), embedder="ollama", ollama_host=host, ollama_model="nomic-embed-text")
        missing = check_embedder(settings)
        assert (missing.status, missing.fix) == ("fail", "ollama pull nomic-embed-text")
        models.append("nomic-embed-text:latest")
        assert check_embedder(settings).status == "ok"
    finally:
        server.shutdown()
        server.server_close()
    down = check_embedder(replace(settings, ollama_host=host))  # nothing listens there any more
    assert (down.status, down.fix) == ("fail", "ollama serve")


def test_install_with_systemd_writes_enables_and_removes_the_unit(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stand-in `systemctl` (no user manager here) records its calls and starts/stops a daemon."""
    calls, bin_dir = tmp_path / "systemctl-calls", tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {calls}\n'
        'case "$*" in\n'
        f'  *restart*|*"enable --now"*) ({sys.executable} -m gitrag daemon </dev/null >/dev/null 2>&1 &) ;;\n'
        f'  *"disable --now"*) {sys.executable} -m gitrag daemon --stop >/dev/null 2>&1 ;;\n'
        "esac\n"
    )
    (bin_dir / "systemctl").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    repo.write("a.py", "def first():\n    return 1\n")
    repo.commit("first")
    try:
        gitrag("install", "--repo", str(repo.path))  # systemd is the default where systemctl --user works
        unit_file = tmp_path / "config" / "systemd" / "user" / unit.UNIT
        assert f"ExecStart={sys.executable} -m gitrag daemon" in unit_file.read_text()
        assert calls.read_text().splitlines()[1:] == [
            "--user daemon-reload", f"--user enable {unit.UNIT}", f"--user restart {unit.UNIT}"]
        assert client.probe()["running"]
        gitrag("install", "--repo", str(repo.path))
        assert calls.read_text().splitlines()[-1] == f"--user enable --now {unit.UNIT}"  # unit unchanged
        gitrag("uninstall", "--repo", str(repo.path))
        assert not unit_file.exists() and f"--user disable --now {unit.UNIT}" in calls.read_text()
        assert not client.probe()["running"]
    finally:
        gitrag("daemon", "--stop")


def test_doctor_checks_the_static_model_from_its_files_without_loading_it(tmp_path: Path) -> None:
    # a fresh process: doctor's embedder check must not import the tokenizer or vector libraries
    script = (
        "import json, sys\n"
        "from gitrag.surfaces.commands.doctor import check_embedder\n"
        "from gitrag.config import Settings\n"
        "c = check_embedder(Settings())\n"
        "print(json.dumps([c.status, c.detail, sorted(m for m in ('tokenizers', 'safetensors', 'torch') if m in sys.modules)]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    status, detail, loaded = json.loads(proc.stdout)
    assert (status, loaded) == ("ok", []) and "checksum ok" in detail

    from gitrag.config import Settings
    from gitrag.index.embedders.static import MODEL_DIR
    from gitrag.surfaces.commands.doctor import check_embedder

    altered = tmp_path / "altered"
    shutil.copytree(MODEL_DIR, altered)
    data = bytearray((altered / "model.safetensors").read_bytes())
    data[-1] ^= 0xFF  # one flipped bit in the vectors
    (altered / "model.safetensors").write_bytes(bytes(data))
    check = check_embedder(Settings(static_model=str(altered)))
    assert check.status == "fail" and "checksum" in check.detail and check.fix


def test_install_in_a_repository_with_no_commit_says_so_without_starting_an_index(
    repo: Repo, daemon: subprocess.Popen[bytes]
) -> None:
    out = gitrag("install", "--no-systemd", "--repo", str(repo.path))
    said = out.stdout + out.stderr
    assert "no commit yet: the first commit will be indexed" in said
    assert "indexing the current branch" not in said  # a new user saw it announced, then "no commit yet"
    gitrag("uninstall", "--repo", str(repo.path))


def test_install_into_a_closed_pipe_finishes_the_install(repo: Repo) -> None:
    """`gitrag install 2>&1 | head -1`: the reader goes away after the first line; the install
    still registers the repository, starts the daemon and indexes (exit 0, no crash.log), so
    doctor is content."""
    from gitrag import config

    repo.write("a.py", "def first():\n    return 1\n")
    repo.commit("first")
    proc = subprocess.Popen([sys.executable, "-m", "gitrag", "install", "--no-systemd", "--repo", str(repo.path)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        proc.stdout.close()  # `head -1` exits
        assert proc.wait(timeout=120) == 0 and first.startswith(b"wrote ")
        assert not (config.state_dir() / "crash.log").exists()
        assert registry.is_registered(GitRepo(str(repo.path)).common_dir)
        report = gitrag_json("doctor", "--repo", str(repo.path))
        assert report["ok"], report
    finally:
        gitrag("daemon", "--stop")


def test_install_systemd_without_a_user_manager_changes_nothing(repo: Repo, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """`gitrag install --systemd` where no systemd user manager answers (a stand-in systemctl
    failing as the real one does with no user bus) is refused before a hook is written or the
    repository registered, in one line naming --no-systemd."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text("#!/bin/sh\necho 'Failed to connect to bus: No medium found' >&2\nexit 1\n")
    (bin_dir / "systemctl").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    before = _snapshot(repo.path / ".git" / "hooks")
    proc = gitrag("install", "--systemd", "--repo", str(repo.path), check=False)
    assert proc.returncode == 1 and "gitrag install --no-systemd" in proc.stderr and "nothing was changed" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stdout == ""
    assert _snapshot(repo.path / ".git" / "hooks") == before
    assert not registry.is_registered(GitRepo(str(repo.path)).common_dir) and not client.probe()["running"]


def test_daemon_subcommand_words_say_the_form_meant() -> None:
    """`gitrag daemon stop` is a usage error that names `gitrag daemon --stop`; --help shows the forms."""
    proc = gitrag("daemon", "stop", check=False)
    assert proc.returncode == 2 and "did you mean `gitrag daemon --stop`?" in proc.stderr
    assert "did you mean `gitrag status`?" in gitrag("daemon", "status", check=False).stderr
    assert "the forms are" in gitrag("daemon", "frobnicate", check=False).stderr
    assert not client.probe()["running"]  # none was started by any of them
    shown = gitrag("daemon", "--help").stdout
    assert "gitrag daemon --stop" in shown and "gitrag status" in shown
