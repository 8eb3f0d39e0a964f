"""``ask --rev REV``: answers from another revision's tree through a revision view built by
the incremental sync (gitrag.query.revisions), on real git repositories with tags."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gitrag.index.workspace import open_workspace
from gitrag.query import revisions
from tests.gitutil import Repo, index

LEGACY = ("def legacy_crc_checksum(payload):\n    \"\"\"The old CRC checksum of a payload (removed in 2.0).\"\"\"\n"
          "    return sum(payload) & 0xFFFF\n")


@pytest.fixture
def tagged(repo: Repo) -> Repo:
    repo.write("lib/checks.py", LEGACY)
    repo.write("lib/io.py", "def read_frame(stream):\n    return stream.read(16)\n")
    repo.commit("1.0")
    repo.git("tag", "v1.0")
    for i in range(3):
        repo.write(f"lib/more{i}.py", f"def helper_{i}():\n    return {i}\n")
        repo.commit(f"more {i}")
    (repo.path / "lib/checks.py").unlink()
    repo.write("lib/hashing.py", "def blake_digest(payload):\n    return payload\n")
    repo.commit("2.0: drop the legacy checksum")
    index(repo.path)
    return repo


def _ask(repo: Repo, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gitrag", "ask", *args, "--repo", str(repo.path), "--no-answer"],
                          capture_output=True, text=True, check=False)


def test_rev_answers_with_code_that_exists_only_at_the_tag(tagged: Repo) -> None:
    now = json.loads(_ask(tagged, "legacy_crc_checksum", "--json").stdout)
    assert all(r["path"] != "lib/checks.py" for r in now["results"])
    proc = _ask(tagged, "legacy_crc_checksum", "--rev", "v1.0", "--json")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    top = got["results"][0]
    assert top["path"] == "lib/checks.py" and "def legacy_crc_checksum" in top["snippet"]
    assert all(not r["path"].startswith("lib/more") and r["path"] != "lib/hashing.py" for r in got["results"])
    v1 = tagged.git("rev-parse", "v1.0^{commit}")
    assert got["revision"] == "v1.0" and got["commit"] == v1 == got["head"] and got["branch"] == "main"
    human = _ask(tagged, "legacy_crc_checksum", "--rev", "v1.0", "-k", "1")
    assert human.returncode == 0 and f"revision v1.0 ({v1[:12]})" in human.stdout
    back = _ask(tagged, "legacy_crc_checksum", "--rev", "HEAD~4", "--json")  # the same commit spelled otherwise
    assert json.loads(back.stdout)["results"][0]["path"] == "lib/checks.py"


def test_a_revision_view_embeds_only_chunks_never_seen(tagged: Repo) -> None:
    with open_workspace(tagged.path) as ws:
        name, commit, first = revisions.ensure(ws, "v1.0")
        # built from main's index by the diff: only lib/checks.py (gone from main) is new
        assert first.started_from == "main" and first.files_indexed == 1 and first.chunks_embedded == 1
        _, _, again = revisions.ensure(ws, "v1.0")
        assert again.chunks_embedded == 0 and again.points_upserted == 0
        assert commit == tagged.git("rev-parse", "v1.0^{commit}")
        _, _, near = revisions.ensure(ws, "HEAD~1")  # checks.py is back: its chunk is in the cache now
    assert near.files_indexed == 1 and near.chunks_embedded == 0 and near.points_upserted == 0  # a shared point


def test_revision_views_are_evicted_least_recently_used_first(tagged: Repo) -> None:
    with open_workspace(tagged.path) as ws:
        for rev in ("HEAD~1", "HEAD~2", "HEAD~3"):
            revisions.ensure(ws, rev)
        names = [b.name for b in ws.state.branches() if revisions.is_view(b.name)]
        assert len(names) == 3
        evicted = revisions.evict(ws, keep=revisions.view_name(revisions.resolve(ws, "HEAD~3")), budget=2)
        assert evicted == [revisions.view_name(revisions.resolve(ws, "HEAD~1"))]
        assert {b.name for b in ws.state.branches()} >= {"main"}


def test_an_unknown_revision_is_one_line(tagged: Repo) -> None:
    proc = _ask(tagged, "x", "--rev", "no-such-tag")
    assert proc.returncode == 1 and "unknown revision 'no-such-tag'" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_rev_through_the_daemon_and_mcp(tagged: Repo, daemon, tmp_path) -> None:
    from tests.test_mcp import _drive, _ok

    proc = _ask(tagged, "legacy_crc_checksum", "--rev", "v1.0", "--json")  # the daemon holds the store
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["results"][0]["path"] == "lib/checks.py"

    async def body(s) -> None:
        got = await _ok(s, "search_code", query="legacy_crc_checksum", k=3, rev="v1.0")
        assert got["results"][0]["path"] == "lib/checks.py" and got["revision"] == "v1.0"
        now = await _ok(s, "search_code", query="legacy_crc_checksum", k=3)
        assert all(r["path"] != "lib/checks.py" for r in now["results"]) and now["revision"] is None
        sym = await _ok(s, "get_symbol", name="legacy_crc_checksum", rev="v1.0")
        assert sym["definitions"][0]["path"] == "lib/checks.py" and "sum(payload)" in sym["definitions"][0]["snippet"]
        assert sym["commit"] == tagged.git("rev-parse", "v1.0^{commit}") and sym["revision"] == "v1.0"
        outline = await _ok(s, "get_file_outline", path="lib/checks.py", rev="HEAD~4")  # a view built on demand
        assert [d["name"] for d in outline["definitions"]] == ["legacy_crc_checksum"]

    _drive(tagged.path, tmp_path, body)
