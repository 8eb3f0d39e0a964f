"""Bytes at rest gone bad, and text quoted for the wrong parser (issue 23).

Each case uses the real engine, real SQLite files and real git: after the corruption,
either the right answers come back (healed: 0 points lost or wrong against a
from-scratch index) or a one-line error names the file and the fix; never a wrong answer
without a word, never an internal error (exit 3).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import numpy as np
import pytest

from gitrag import config
from gitrag.index.vector_cache import decode_vector
from tests import format1_repo
from tests.gitutil import Repo
from tests.reliability import commit_a, lost_wrong, record, run, sync

GROUP = "integrity"
DATA = Path(__file__).parent / "data"


def _cache() -> Path:
    return config.data_root() / "cache.db"


def _clone(repo: Repo, tmp_path: Path, name: str = "clone") -> Path:
    dest = tmp_path / name
    subprocess.run(["git", "clone", "-q", str(repo.path), str(dest)], check=True, capture_output=True)
    return dest


def _index_json(path: Path) -> dict:
    proc = run("index", "--json", "--repo", str(path))
    assert proc.returncode == 0, proc.stderr
    assert "internal error" not in proc.stderr
    return json.loads(proc.stdout)


def _one_chunk_row(db: sqlite3.Connection) -> tuple[int, bytes]:
    """(row id, vec) of one chunk vector (not a path vector: chunk keys are 32 bytes)."""
    return db.execute("SELECT id, vec FROM vectors WHERE length(key) = 32 ORDER BY key LIMIT 1").fetchone()


# -- case 3: a truncated row in the vector cache -------------------------------------------


def test_a_truncated_cache_row_is_dropped_and_embedded_again(repo: Repo, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    commit_a(repo)
    sync(repo.path)
    with sqlite3.connect(_cache()) as db:
        rid, vec = _one_chunk_row(db)
        db.execute("UPDATE vectors SET vec = ? WHERE id = ?", (vec[:-3], rid))  # a truncated row: short of its dimensions
    clone = _clone(repo, tmp_path)
    out = _index_json(clone)  # today: exit 3, ValueError('buffer size must be a multiple of element size')
    assert out["chunks_embedded"] == 1, out  # that one chunk, and only it, is embedded again
    with sqlite3.connect(_cache()) as db:
        assert len(db.execute("SELECT vec FROM vectors WHERE id = ?", (rid,)).fetchone() or [b"x" * len(vec)])
        assert {len(v) for (v,) in db.execute("SELECT vec FROM vectors")} == {len(vec)}  # no truncated row is left
    lost, wrong = lost_wrong(clone, tmp_path, monkeypatch)
    assert (lost, wrong) == (0, 0)
    record("a truncated row in the vector cache (3 bytes cut)", "dropped, counted, that chunk embedded again; "
           "a clone's index exits 0", lost, wrong, GROUP)


# -- case 4: a swapped row in the vector cache ----------------------------------------------


def test_a_swapped_cache_row_is_detected_and_never_served(repo: Repo, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    commit_a(repo)
    sync(repo.path)
    with sqlite3.connect(_cache()) as db:
        rows = db.execute("SELECT id, digest, vec FROM vectors WHERE length(key) = 32 ORDER BY key LIMIT 2").fetchall()
        (a, da, va), (b, db_, vb) = rows
        assert va != vb
        # the other chunk's vector, and its digest with it: both rows now hold a valid pair of another key
        db.execute("UPDATE vectors SET digest = ?, vec = ? WHERE id = ?", (db_, vb, a))
        db.execute("UPDATE vectors SET digest = ?, vec = ? WHERE id = ?", (da, va, b))
    clone = _clone(repo, tmp_path)
    out = _index_json(clone)  # today: taken by the clone and served
    assert out["chunks_embedded"] == 2, out
    lost, wrong = lost_wrong(clone, tmp_path, monkeypatch)
    assert (lost, wrong) == (0, 0)
    record("two rows of the vector cache swapped (each the vector and digest of the other chunk)",
           "both detected (the digest binds the chunk SHA-256), dropped, embedded again", lost, wrong, GROUP)


def test_a_flipped_byte_in_a_cached_vector_is_detected(repo: Repo, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    commit_a(repo)
    sync(repo.path)
    with sqlite3.connect(_cache()) as db:
        rid, vec = _one_chunk_row(db)
        flipped = bytearray(vec)
        flipped[7] ^= 0x10
        db.execute("UPDATE vectors SET vec = ? WHERE id = ?", (bytes(flipped), rid))
    clone = _clone(repo, tmp_path)
    assert _index_json(clone)["chunks_embedded"] == 1
    assert lost_wrong(clone, tmp_path, monkeypatch) == (0, 0)


# -- the format-1 cache of the previous release is converted, nothing embedded again ---------


def test_a_format1_cache_written_by_the_previous_release_is_converted_without_embedding(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "tiny"
    format1_repo.make(path)
    cache = _cache()
    cache.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(DATA / "cache-format1.db", cache)  # written by gitrag 83e0fdf: float32, no digests
    with sqlite3.connect(cache) as db:
        old = {(h, f): np.frombuffer(v, dtype=np.float32) for h, f, v in db.execute("SELECT * FROM vectors")}
    out = _index_json(path)
    assert out["chunks_embedded"] == 0 and out["chunks_reused"] == out["chunks_total"] > 0, out
    assert out.get("paths_embedded", 0) == 0, out
    with sqlite3.connect(cache) as db:
        assert db.execute("SELECT value FROM meta WHERE key='format'").fetchone() == ("3",)
        fps = dict(db.execute("SELECT id, name FROM fingerprints"))
        new = {(bytes(k).hex() if len(k) == 32 else bytes(k).decode(), fps[f]): decode_vector(v)
               for k, f, v in db.execute("SELECT key, fp, vec FROM vectors")}
        assert db.execute("SELECT count(*) FROM sqlite_master WHERE name LIKE '%format1%'").fetchone()[0] == 0
    assert new.keys() == old.keys()
    for key, vec in old.items():  # int8 with a per-row scale: within half a step (max|v| / 254)
        assert np.allclose(new[key], vec, atol=float(np.abs(vec).max()) / 254 * 1.2)
    assert lost_wrong(path, tmp_path, monkeypatch) == (0, 0)


def test_cache_rows_fit_their_page(tmp_path: Path) -> None:
    """2,000 vectors of the bundled model's 256 dims take under 700 bytes each on disk: no
    row has an overflow page (format 1: 1 KB float32 ``WITHOUT ROWID`` rows, a 4 KB page each)."""
    from gitrag.index.vector_cache import VectorCache

    rng = np.random.default_rng(0)
    cache = VectorCache(tmp_path / "cache.db")
    items = {f"{i:064x}": rng.standard_normal(256).astype(np.float32) for i in range(2000)}
    cache.put_vectors(items, "static:potion-code-16M:256")
    cache.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    cache.close()
    per_row = (tmp_path / "cache.db").stat().st_size / len(items)
    assert per_row < 700, per_row


# -- case 5: values quoted for the parser that reads them -----------------------------------

ODD = "odd dir %h $HOME \\ \"q\" 'x"  # a space, a specifier, a variable, a backslash, both quotes


def _odd_python(tmp_path: Path, name: str = ODD) -> str:
    """A real interpreter reached through a folder whose name needs quoting."""
    import shlex
    import sys

    folder = tmp_path / name.replace("'", "").replace("\\", "").replace('"', "")
    folder.mkdir(parents=True)
    wrapper = folder / "python"  # runs this venv's interpreter (a symlink would lose the venv)
    wrapper.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} \"$@\"\n")
    wrapper.chmod(0o755)
    return str(wrapper)


def _verify(tmp_path: Path, runtime: Path, text: str) -> subprocess.CompletedProcess[str]:
    unit_file = tmp_path / "user" / "gitrag.service"
    unit_file.parent.mkdir(exist_ok=True)
    unit_file.write_text(text)
    import os

    return subprocess.run(["systemd-analyze", "--user", "verify", str(unit_file)], capture_output=True, text=True,
                          env={**os.environ, "XDG_RUNTIME_DIR": str(runtime)})


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze is missing: `apt-get install -y systemd` provides it")
def test_the_systemd_unit_is_quoted_by_systemd_rules(tmp_path: Path, runtime_dir: Path) -> None:
    from gitrag.daemon import systemd

    python = _odd_python(tmp_path)  # spaces, % and $ in the interpreter's path: quoted
    home = f"/srv/{ODD}"  # and every special character in GITRAG_HOME
    text = systemd.render(python, {"GITRAG_HOME": home})
    proc = _verify(tmp_path, runtime_dir, text)  # verify also checks that ExecStart names an executable that exists
    assert proc.returncode == 0 and not (proc.stdout + proc.stderr).strip(), proc.stdout + proc.stderr
    assert "%h" not in text.replace("%%h", "")  # no specifier left to expand
    # a newline cannot inject a setting: refused in one line (was: a working ExecStartPre= line)
    with pytest.raises(systemd.SystemdError, match="control character '\\\\n'"):
        systemd.render(python, {"GITRAG_HOME": "/tmp/a\nExecStartPre=/bin/touch /tmp/pwned"})
    # a quote in the interpreter's path is refused by systemd in an executable name: refused here, in one line
    with pytest.raises(systemd.SystemdError, match="systemd refuses in an executable name"):
        systemd.render("/opt/it's/python", {})
    record("GITRAG_HOME with a newline, a space, %, $, \\ and quotes; an interpreter path with spaces, % and $",
           "quoted by systemd.syntax(7) rules, `systemd-analyze verify` passes; a newline or a quote in the "
           "interpreter path refused in one line", group=GROUP)


def test_hooks_with_an_odd_interpreter_path_parse_and_run(repo: Repo, tmp_path: Path) -> None:
    from gitrag.daemon import spool
    from gitrag.git import hooks as install
    from gitrag.surfaces.commands.doctor import _hook_python

    python = _odd_python(tmp_path, ODD + "\nnext line")  # a newline too: the hook is sh, shlex-quoted
    repo.write("a.py", "def a():\n    return 1\n")
    repo.commit("a")
    hooks = repo.path / ".git" / "hooks"
    from gitrag.daemon import registry

    registry.add((repo.path / ".git").resolve(), hooks)  # what `gitrag install` registers
    for name in install.HOOKS:
        (hooks / name).write_text(install.render(name, python))
        (hooks / name).chmod(0o755)
        proc = subprocess.run(["sh", "-n", str(hooks / name)], capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stderr
        assert _hook_python(hooks / name) == python  # doctor reads the path sh runs
    before = spool.pending()
    repo.write("b.py", "def b():\n    return 2\n")
    repo.commit("b")  # the real post-commit runs the interpreter through that path; no daemon: spooled
    from tests.daemonutil import wait_for

    wait_for(lambda: spool.pending() > before, "the hook's event to reach the spool")


# -- case 6: a sha256 repository -------------------------------------------------------------


@pytest.mark.parametrize("command", [["install", "--no-systemd"], ["index"], ["ask", "area"], ["status"],
                                     ["doctor"], ["gc"], ["log", "area"], ["related", "a.py:1"], ["uninstall"],
                                     ["mcp"], ["eval", "QUESTIONS"]])
def test_a_sha256_repository_is_refused_in_one_line_by_every_command(tmp_path: Path, command: list[str]) -> None:
    path = tmp_path / "sha256"
    subprocess.run(["git", "init", "-q", "--object-format=sha256", str(path)], check=True)
    (path / "a.py").write_text("def area(r):\n    return 3.14 * r * r\n")
    import os

    from tests.gitutil import GIT_ENV

    env = {**os.environ, **GIT_ENV}
    subprocess.run(["git", "add", "-A"], cwd=path, check=True, env=env)
    subprocess.run(["git", "commit", "-qm", "a"], cwd=path, check=True, env=env)
    if "QUESTIONS" in command:  # a well-formed question set, so the repository is what is refused
        questions = tmp_path / "questions.jsonl"
        questions.write_text(json.dumps({"id": "q1", "kind": "concept", "query": "area", "targets": [
            {"path": "a.py", "symbol": "area", "start_line": 1, "end_line": 2}]}) + "\n")
        command = [str(questions) if c == "QUESTIONS" else c for c in command]
    proc = run(*command, "--repo", str(path))
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1, proc.stdout + proc.stderr  # today: exit 3, "please report it"
    assert "sha256 repository" in lines[0] and "not supported" in lines[0]
    assert "internal error" not in proc.stderr and not (path / ".git" / "hooks" / "post-commit").exists()
    record(f"`gitrag {command[0]}` in a `git init --object-format=sha256` repository",
           "exit 1, one line: a sha256 repository, not supported (pygit2's libgit2 reads sha1 only)", group=GROUP)


# -- cases 1 and 2: the store's files gone bad -----------------------------------------------


def _segment_files(name: str) -> list[Path]:
    return sorted(config.data_root().glob(f"*/qdrant/*/segments/*/{name}"))


def _overwrite(path: Path, data: bytes, rot: bool = True) -> None:
    """``data`` over the start of ``path``; with ``rot`` its mtime put back, as bit rot leaves it
    (what the store's file record, which compares a large file's mtime, cannot see: the
    per-query checks' case)."""
    st = path.stat()
    with open(path, "r+b") as fh:
        fh.write(data)
    if rot:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def _ask(path: Path, question: str, mode: str = "hybrid") -> subprocess.CompletedProcess[str]:
    return run("ask", question, "--json", "--no-answer", "--mode", mode, "--repo", str(path))


def _answers(proc: subprocess.CompletedProcess[str]) -> list[tuple[str, int, float]]:
    assert proc.returncode == 0, proc.stderr
    assert "internal error" not in proc.stderr
    return [(r["path"], r["start_line"], round(r["score"], 3)) for r in json.loads(proc.stdout)["results"]]


QUESTIONS = ["alpha function value", "gamma", "how is beta computed", "delta helper"]


def _asked(path: Path, mode: str) -> list[list[tuple[str, int, float]]]:
    return [_answers(_ask(path, q, mode)) for q in QUESTIONS]


def _no_aside_left() -> bool:
    return not list(config.data_root().glob("*/qdrant/*.damaged-*"))


def _doctor(path: Path, *extra: str) -> tuple[int, str]:
    proc = run("doctor", *extra, "--repo", str(path))
    assert "internal error" not in proc.stderr
    line = next((row for row in proc.stdout.splitlines() if " integrity " in f" {row} "), "")
    return proc.returncode, line


def test_dense_vectors_overwritten_in_the_store_are_detected_and_healed(
        repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    commit_a(repo)
    sync(repo.path)
    before = _asked(repo.path, "dense")
    (vectors,) = _segment_files("vector_storage-dense/vectors/chunk_0.mmap")
    _overwrite(vectors, os.urandom(64 * 1024))  # random bytes over every stored vector, the mtime kept
    code, line = _doctor(repo.path)  # today: "ok store", nothing else
    assert code == 1 and line.startswith("FAIL integrity") and "fail" in line, line
    assert "gitrag index --rebuild" in line
    after = _asked(repo.path, "dense")  # today: 20 of 20 dense answers changed, no word
    assert after == before
    assert _no_aside_left()
    assert _doctor(repo.path, "--deep")[1].startswith("ok   integrity")
    lost, wrong = lost_wrong(repo.path, tmp_path, monkeypatch)
    assert (lost, wrong) == (0, 0)
    record("random bytes over the store's dense vector file, its mtime put back (bit rot)", "doctor: FAIL integrity, fix `gitrag index --rebuild`; "
           "the next ask finds the shown points' vectors failing their signature, rebuilds the collection from the "
           "cache (nothing embedded) and answers as before", lost, wrong, GROUP)


def test_vectors_the_engine_cannot_score_are_detected_and_healed(
        repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Random bytes over the vector file make some vectors NaN in float16 (1 value in 32 is
    NaN or infinite); the engine scores no such vector, so its dense list comes back short or
    empty and the shown points, if any, pass their checks. The CI run's "empty results
    after the heal" was this: no heal had happened. Here every vector is NaN."""
    commit_a(repo)
    sync(repo.path)
    before = {mode: _asked(repo.path, mode) for mode in ("dense", "hybrid")}
    (vectors,) = _segment_files("vector_storage-dense/vectors/chunk_0.mmap")
    _overwrite(vectors, b"\x00\x7e" * (32 * 1024))  # float16 NaN over every stored vector, the mtime kept
    after = _asked(repo.path, "dense")  # was: no result for any question, exit 0, no word
    assert after == before["dense"]
    assert _asked(repo.path, "hybrid") == before["hybrid"]
    assert _no_aside_left()
    lost, wrong = lost_wrong(repo.path, tmp_path, monkeypatch)
    assert (lost, wrong) == (0, 0)
    record("NaN over every vector in the store's dense vector file, its mtime put back (the engine scores none)", "the next ask finds "
           "its dense list shorter than the branch's points, rebuilds the collection from the cache (nothing "
           "embedded) and answers as before (was: empty answers, exit 0, no word)", lost, wrong, GROUP)


def _break_segment() -> None:
    (payload,) = _segment_files("payload_storage/page_0.dat")
    with open(payload, "r+b") as fh:
        fh.write(b"\0" * 4096)  # a payload page zeroed
    (segment,) = _segment_files("segment.json")
    segment.unlink()  # and segment.json gone


def test_a_corrupt_store_segment_is_moved_aside_and_rebuilt(repo: Repo, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    commit_a(repo)
    sync(repo.path)
    before = _asked(repo.path, "hybrid")
    _break_segment()
    code, line = _doctor(repo.path, "--deep")  # today: "ok store"
    assert code == 1 and "is damaged" in line and "gitrag index --rebuild" in line, line
    assert "Failed to decompress" not in line and "\n" not in line
    after = _asked(repo.path, "hybrid")  # today: the engine's raw message
    assert after == before
    assert _no_aside_left()
    lost, wrong = lost_wrong(repo.path, tmp_path, monkeypatch)
    assert (lost, wrong) == (0, 0)
    record("a store segment broken (a payload page zeroed, segment.json gone)", "doctor --deep: FAIL, the "
           "collection is damaged, fix `gitrag index --rebuild`; the next ask moves it aside, rebuilds it from the "
           "cache and git (nothing embedded), answers as before, deletes the moved copy", lost, wrong, GROUP)


def test_index_rebuild_repairs_a_corrupt_store_without_embedding(repo: Repo, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    commit_a(repo)
    sync(repo.path)
    _break_segment()
    proc = run("index", "--rebuild", "--json", "--repo", str(repo.path))  # today: fails like the ask
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["chunks_embedded"] == 0 and out["chunks_reused"] == out["chunks_total"] > 0, out
    assert _no_aside_left()
    assert _doctor(repo.path, "--deep")[1].startswith("ok   integrity")
    lost, wrong = lost_wrong(repo.path, tmp_path, monkeypatch)
    assert (lost, wrong) == (0, 0)
    record("`gitrag index --rebuild` on a broken store segment", "exit 0: moved aside, rebuilt from the cache "
           "(0 chunks embedded), the moved copy deleted", lost, wrong, GROUP)


def test_a_store_file_written_behind_gitrag_is_found_before_the_engine_loads_it(
        repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    commit_a(repo)
    sync(repo.path)
    before = _asked(repo.path, "hybrid")
    (status,) = _segment_files("vector_storage-dense/deleted/status.dat")
    _overwrite(status, b"\xff" * 8)  # a small file: compared by its bytes, whatever its mtime
    (vectors,) = _segment_files("vector_storage-dense/vectors/chunk_0.mmap")
    _overwrite(vectors, os.urandom(64 * 1024), rot=False)  # a large one: by its size and mtime
    first = _ask(repo.path, QUESTIONS[0])
    assert "since gitrag last wrote it" in first.stderr and "is damaged" in first.stderr, first.stderr
    assert _asked(repo.path, "hybrid") == before
    assert "damaged" not in _ask(repo.path, QUESTIONS[0]).stderr  # healed once, recorded again
    assert _no_aside_left()
    lost, wrong = lost_wrong(repo.path, tmp_path, monkeypatch)
    assert (lost, wrong) == (0, 0)
    record("a store file changed behind gitrag (a deleted-flags status.dat overwritten; random bytes over the "
           "dense vector file, its mtime new)", "the next ask finds the files differing from the collection's file "
           "record before the engine loads them (a damaged file can abort the process inside the load), moves the "
           "collection aside, rebuilds it from the cache (nothing embedded), answers as before", lost, wrong, GROUP)


def test_a_store_whose_file_times_changed_is_rebuilt_once_and_then_trusted(
        repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a process killed between a flush (or close) and the record's rename leaves: the
    engine rewrote files with the same bytes, new mtimes (gitrag.index.store.files)."""
    commit_a(repo)
    sync(repo.path)
    before = _asked(repo.path, "hybrid")
    (vectors,) = _segment_files("vector_storage-dense/vectors/chunk_0.mmap")
    os.utime(vectors)  # the bytes unchanged, the mtime now
    first = _ask(repo.path, QUESTIONS[0])
    assert "is damaged" in first.stderr and _answers(first) == before[0], first.stderr
    second = _ask(repo.path, QUESTIONS[0])
    assert "damaged" not in second.stderr and _answers(second) == before[0], second.stderr
    assert _asked(repo.path, "hybrid") == before
    lost, wrong = lost_wrong(repo.path, tmp_path, monkeypatch)
    assert (lost, wrong) == (0, 0)
    record("a store file's mtime changed, its bytes not (a process killed between the engine's flush and the file "
           "record's update)", "the next ask rebuilds the collection once from the cache (nothing embedded) and "
           "answers as before; the ask after it opens it without a word", lost, wrong, GROUP)


def test_the_daemon_heals_a_store_it_holds_open(repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from tests.daemonutil import stop_daemon
    from tests.reliability import start_daemon

    commit_a(repo)
    sync(repo.path)
    before = _asked(repo.path, "dense")
    proc = start_daemon()
    try:
        assert _asked(repo.path, "dense") == before  # the daemon has the shard open now
        (vectors,) = _segment_files("vector_storage-dense/vectors/chunk_0.mmap")
        with open(vectors, "r+b") as fh:  # under its memory map
            fh.write(os.urandom(64 * 1024))
        assert _asked(repo.path, "dense") == before  # checked, rebuilt on the daemon's worker thread, asked again
        assert _no_aside_left()
    finally:
        stop_daemon(proc)
    lost, wrong = lost_wrong(repo.path, tmp_path, monkeypatch)
    assert (lost, wrong) == (0, 0)
    record("random bytes over the dense vector file of a store the daemon holds open", "the daemon's ask finds "
           "the shown points' vectors failing their signature, rebuilds the collection on its worker thread, "
           "answers as before",
           lost, wrong, GROUP)


def test_a_manifest_row_that_is_no_longer_json_is_one_line_and_rebuild_repairs_it(
        repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A byte gone bad inside a manifest payload's text in ``state.db`` (the corruption fuzz,
    seed 7, trial 59): SQLite's own checks pass; the JSON does not parse."""
    commit_a(repo)
    sync(repo.path)
    before = _asked(repo.path, "hybrid")
    (state,) = config.data_root().glob("repo-*/state.db")
    with sqlite3.connect(state) as db:
        pid, payload = db.execute("SELECT point_id, payload FROM points ORDER BY point_id LIMIT 1").fetchone()
        db.execute("UPDATE points SET payload = ? WHERE point_id = ?", (payload.replace('"', "'", 3), pid))
    proc = _ask(repo.path, QUESTIONS[0])  # was: exit 3, JSONDecodeError(...), "please report it"
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert str(state) in lines[0] and "gitrag index --rebuild" in lines[0] and "internal error" not in lines[0]
    rebuilt = run("index", "--rebuild", "--json", "--repo", str(repo.path))
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert json.loads(rebuilt.stdout)["chunks_embedded"] == 0
    assert _asked(repo.path, "hybrid") == before
    lost, wrong = lost_wrong(repo.path, tmp_path, monkeypatch)
    assert (lost, wrong) == (0, 0)
    record("a manifest payload in state.db that is no longer JSON (a byte gone bad inside its text)",
           "exit 1, one line naming state.db and `gitrag index --rebuild`, which sets the state aside and rebuilds "
           "it from git and the cache (0 chunks embedded); answers as before (was: exit 3, JSONDecodeError)",
           lost, wrong, GROUP)



def test_a_state_index_that_lost_a_row_is_found_and_rebuild_repairs_it(
        repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The corruption fuzz's seeds 1 and 7: a flipped byte in ``state.db`` left the
    ``points_by_path`` index without one row (``PRAGMA quick_check`` passes); a later heal
    rebuilt the store from the manifest read through that index, one point short, and
    ``index --rebuild`` kept the state, so the answers never came back."""
    commit_a(repo)
    sync(repo.path)
    before = _asked(repo.path, "hybrid")
    (state,) = config.data_root().glob("repo-*/state.db")
    with sqlite3.connect(state) as db:  # the index rebuilt without one row, then declared whole again
        (pid,) = db.execute("SELECT point_id FROM points ORDER BY point_id LIMIT 1").fetchone()
        db.execute("DROP INDEX points_by_path")
        db.execute(f"CREATE INDEX points_by_path ON points(path, blob) WHERE point_id != '{pid}'")
        db.execute("PRAGMA writable_schema = ON")
        db.execute("UPDATE sqlite_master SET sql = 'CREATE INDEX points_by_path ON points(path, blob)' "
                   "WHERE name = 'points_by_path'")
    with sqlite3.connect(state) as db:
        assert db.execute("PRAGMA quick_check").fetchone()[0] == "ok"  # what --rebuild asked before
        assert db.execute("PRAGMA integrity_check(1)").fetchone()[0] != "ok"
    proc = run("doctor", "--deep", "--repo", str(repo.path))
    assert proc.returncode == 1 and f"{state} fails SQLite's check" in proc.stdout, proc.stdout
    rebuilt = run("index", "--rebuild", "--json", "--repo", str(repo.path))  # was: the store rebuilt one point short
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert json.loads(rebuilt.stdout)["chunks_embedded"] == 0
    assert _asked(repo.path, "hybrid") == before
    lost, wrong = lost_wrong(repo.path, tmp_path, monkeypatch)
    assert (lost, wrong) == (0, 0)
    record("a state.db index that lost a row (`points_by_path`; SQLite's quick_check passes)", "doctor --deep: FAIL "
           "naming state.db; `gitrag index --rebuild` finds it (integrity_check), sets the state aside and rebuilds "
           "it from git and the cache (0 chunks embedded); answers as before (was: the store rebuilt one point "
           "short, every ask failing its count check)", lost, wrong, GROUP)
