"""A committed ``.gitrag.toml`` that is broken stops nothing: every command goes on on the
other settings with one warning line naming the file, the line and what is wrong; ``gitrag
doctor`` fails its config check with the fix; a hook never fails a commit over it; the
daemon indexes this repository (on defaults) and the others. Real git, real processes."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.daemonutil import gitrag, indexed_at, wait_for
from tests.gitutil import GIT_ENV, Repo

# (what, the file's text, the line named, words of what is wrong)
BROKEN = [
    ("syntax", 'embedder = "hash"\nbatch_size = \n', "line 2, column 14", "not TOML (invalid value)"),
    ("wrong type", '# ours\nmax_file_bytes = 100\nbatch_size = "lots"\n', "line 3",
     "must be a whole number of texts greater than 0, got 'lots'"),
    ("text setting given a number", "\nembedder = 3\n", "line 2", "must be a string (in quotes), got 3"),
    ("unknown key", "max_file_bytes = 100\n\nbatchsize = 8\n", "line 3", "unknown setting(s) batchsize"),
    ("unknown table", "[tuning]\nbatch_size = 8\n", "line 1", "unknown setting(s) tuning"),
    ("not UTF-8", b"max_file_bytes = 100\n# caf\xe9\n", "line 2", "not UTF-8 text"),
    ("a user-only setting beside a bad one", 'ollama_host = "http://192.0.2.1"\nbatch_size = 0\n', "line 2",
     "must be a whole number of texts greater than 0, got 0"),  # one line: the file is ignored whole
]


def _project(repo: Repo, text: str | bytes) -> None:
    repo.write("app.py", "def compute_invoice_total(items):\n    return sum(i.price for i in items)\n")
    repo.write("big.py", "def big():\n" + "    x = 1\n" * 40)  # 450 bytes: skipped only if max_file_bytes = 100 applied
    repo.write(".gitrag.toml", text)
    repo.commit("a broken .gitrag.toml")


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ".gitrag.toml" in line]


@pytest.mark.parametrize(("what", "text", "line", "why"), BROKEN, ids=[b[0] for b in BROKEN])
def test_every_command_goes_on_with_one_warning_line(repo: Repo, what: str, text: str | bytes, line: str,
                                                     why: str) -> None:
    _project(repo, text)
    where = repo.path / ".gitrag.toml"
    index = gitrag("index", "--json", "--repo", str(repo.path), check=False)
    assert index.returncode == 0, index.stderr
    summary = json.loads(index.stdout)
    assert summary["files_indexed"] == 3 and summary["files_skipped"] == 0  # max_file_bytes = 100 not applied
    (warning,) = _warnings(index.stderr)
    assert warning.startswith("gitrag: warning: ") and f"{where} {line}" in warning and why in warning, warning
    assert "ignored (defaults used)" in warning
    # `log` reads git and the commit index only, no settings: it has nothing to warn of
    for args, warned in ((("ask", "invoice total", "--no-answer", "--json"), 1), (("status", "--json"), 1),
                         (("related", "app.py:1", "--json"), 1), (("gc", "--json"), 1), (("log", "invoice", "--json"), 0)):
        proc = gitrag(*args, "--repo", str(repo.path), check=False)
        assert proc.returncode == 0, (args, proc.stderr)
        json.loads(proc.stdout)
        assert len(_warnings(proc.stderr)) == warned, (args, proc.stderr)
    ask = json.loads(gitrag("ask", "invoice total", "--no-answer", "--json", "--repo", str(repo.path)).stdout)
    assert ask["results"][0]["symbol"] == "compute_invoice_total"


def test_doctor_fails_the_config_check_with_the_fix(repo: Repo) -> None:
    _project(repo, BROKEN[1][1])
    proc = gitrag("doctor", "--json", "--repo", str(repo.path), check=False)
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    assert proc.returncode == 1 and checks["config"]["status"] == "fail", checks["config"]
    assert f"{repo.path / '.gitrag.toml'} line 3" in checks["config"]["detail"]
    assert "git rm .gitrag.toml" in checks["config"]["fix"]
    human = gitrag("doctor", "--repo", str(repo.path), check=False).stdout
    assert any(row.startswith("FAIL config") and "-> correct the line named" in row for row in human.splitlines())
    (repo.path / ".gitrag.toml").write_text("max_file_bytes = 100\n")  # fixed: applied, and doctor is content
    proc = gitrag("doctor", "--json", "--repo", str(repo.path), check=False)
    assert {c["name"]: c["status"] for c in json.loads(proc.stdout)["checks"]}["config"] == "ok"
    assert "warning" not in proc.stderr


def test_a_user_config_that_is_broken_is_still_an_error(repo: Repo, isolated_home: Path) -> None:
    """The user's own file is theirs to fix: it stays a one-line error (exit 1), not a warning."""
    _project(repo, "max_file_bytes = 100\n")
    user = isolated_home / ".config" / "gitrag" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text("batch_size = \n")
    proc = gitrag("status", "--repo", str(repo.path), check=False)
    assert proc.returncode == 1 and proc.stderr.startswith(f"gitrag: error: cannot read {user} line 1, column 14")


def test_hooks_and_the_daemon_go_on(repo: Repo, tmp_path: Path, daemon: subprocess.Popen[bytes]) -> None:
    """Two installed repositories, one with a broken .gitrag.toml committed: commits in both
    succeed (the hooks exit 0, print nothing) and the daemon indexes both, the broken one on defaults."""
    good = Repo(tmp_path / "good")
    good.write("util.py", "def helper():\n    return 1\n")
    good.commit("first")
    _project(repo, BROKEN[0][1])
    for r in (repo, good):
        gitrag("install", "--no-systemd", "--repo", str(r.path))
    heads: dict[Path, str] = {}
    for r in (repo, good):
        r.write("billing.py", "def refund_invoice(invoice):\n    return -invoice.total\n")
        r.git("add", "-A")
        commit = subprocess.run(["git", "commit", "-q", "-m", "billing"], cwd=r.path, capture_output=True, text=True,
                                env={**os.environ, **GIT_ENV})
        assert commit.returncode == 0 and commit.stdout == "" and commit.stderr == "", commit.stderr
        heads[r.path] = r.head()
    for path, head in heads.items():
        status: Any = wait_for(lambda p=path, h=head: indexed_at(p, h), f"{path.name} indexed at {head[:8]}")
        assert status
    hit = json.loads(gitrag("ask", "refund invoice", "--no-answer", "--json", "--repo", str(repo.path)).stdout)
    assert hit["results"][0]["symbol"] == "refund_invoice" and hit["up_to_date"]
    daemon_log = Path(os.environ["GITRAG_HOME"] + "-daemon.log").read_text()  # tests.daemonutil.start_daemon's
    assert f"{repo.path / '.gitrag.toml'} line 2, column 14" in daemon_log
