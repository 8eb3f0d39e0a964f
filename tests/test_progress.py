"""Progress of a long index where no bar can be drawn: plain lines on a piped stderr, info
events in the daemon's log. Intervals come from GITRAG_PROGRESS_INTERVAL (0: every report),
so nothing here depends on time."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gitrag.errors import ConfigError
from gitrag.progress import LINE_RE, STAGES, UNKNOWN, Lines, format_line, interval
from tests.gitutil import Repo

N_FILES = 40


@pytest.fixture
def project(repo: Repo) -> Repo:
    """A real repository with enough files for many progress reports."""
    for i in range(N_FILES):
        funcs = "".join(f"def handler_{i}_{j}(event):\n    return event.get({j!r}, {i})\n\n\n"
                        for j in range(4))
        repo.write(f"pkg/mod_{i:02d}.py", f'"""Module {i}."""\n\n\n{funcs}')
    repo.commit("forty modules")
    return repo


def _index(cwd: Path, *args: str, every: str = "0") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GITRAG_PROGRESS_INTERVAL": every}
    return subprocess.run([sys.executable, "-m", "gitrag", "index", *args], cwd=cwd, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=300, check=True)


def _progress(stderr: str) -> list[dict[str, Any]]:
    """Every ``gitrag: indexing ...`` line of ``stderr``, parsed (all must parse)."""
    lines = [line for line in stderr.splitlines() if line.startswith("gitrag: indexing ")]
    parsed = []
    for line in lines:
        m = LINE_RE.match(line.removeprefix("gitrag: "))
        assert m, line
        known = m["total"] is not None  # a line "... 1,200 so far, 3 s": the stage's total is not known yet
        parsed.append({**m.groupdict(), "done": int(m["done"].replace(",", "")),
                       "total": int(m["total"].replace(",", "")) if known else None,
                       "percent": int(m["percent"]) if known else None})
    return parsed


def _check_stages(lines: list[dict[str, Any]]) -> dict[str, int]:
    """Per stage: no total, then one total that never changes; ``done`` never goes back,
    nor does the percentage; the last report is complete."""
    totals: dict[str, int] = {}
    last: dict[str, int] = {}
    shares: dict[str, int] = {}
    for line in lines:
        stage = line["stage"]
        assert line["done"] >= last.get(stage, 0), line
        last[stage] = line["done"]
        if line["total"] is None:
            assert stage not in totals, ("a total given, then taken back", line)
            continue
        assert totals.setdefault(stage, line["total"]) == line["total"], line
        assert line["done"] <= line["total"] and line["percent"] == 100 * line["done"] // line["total"], line
        assert line["percent"] >= shares.get(stage, 0), line
        shares[stage] = line["percent"]
    assert last == totals, (last, totals)
    return totals


def test_index_json_off_a_terminal_reports_progress_on_stderr_only(project: Repo) -> None:
    proc = _index(project.path, "--json")
    summary = json.loads(proc.stdout)  # stdout is the one JSON document, nothing else
    assert proc.stdout.count("\n") == 1
    assert "\x1b" not in proc.stderr  # no ANSI codes, no bar
    lines = _progress(proc.stderr)
    assert {line["label"] for line in lines} == {"indexing main"}
    totals = _check_stages(lines)
    assert {STAGES["chunk"], STAGES["embed"], STAGES["store"]} <= set(totals)
    assert totals[STAGES["chunk"]] == N_FILES == summary["files_indexed"]
    assert totals[STAGES["embed"]] >= summary["chunks_embedded"] > N_FILES
    assert totals[STAGES["store"]] == summary["points_upserted"]


def test_human_index_off_a_terminal_reports_progress_and_keeps_stdout_for_the_summary(project: Repo) -> None:
    proc = _index(project.path)
    assert re.fullmatch(r"main @ [0-9a-f]{12}: 40 files indexed.*\n", proc.stdout, re.S)
    assert "gitrag: indexing" not in proc.stdout
    assert _check_stages(_progress(proc.stderr))


def test_a_first_index_in_batches_never_shows_a_percentage_fall(repo: Repo) -> None:
    """A sync written in batches learns its chunk and point counts only when the last batch
    is chunked: before, the lines say the count so far with no percentage (a projection from
    the batches so far grew as bigger files came, and its 44% fell to 39%); after, the exact
    total. Small files sort first here, as they did in the report, and batches are 8 chunks."""
    for i in range(12):
        repo.write(f"pkg/a_{i:02d}.py", f"def small_{i}(x):\n    return x + {i}\n")
    for i in range(12):
        funcs = "".join(f"def big_{i}_{j}(event):\n    return event.get({j!r}, {i})\n\n\n" for j in range(8))
        repo.write(f"pkg/b_{i:02d}.py", f'"""Module {i}."""\n\n\n{funcs}')
    repo.commit("small files, then big ones")
    from tests.reliability import run

    proc = run("index", "--json", "--repo", str(repo.path), prelude={"set": [["gitrag.index.indexer", "BATCH_CHUNKS", 8]]},
               env={"GITRAG_PROGRESS_INTERVAL": "0"})
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    lines = _progress(proc.stderr)
    totals = _check_stages(lines)
    assert totals[STAGES["chunk"]] == 24 and totals[STAGES["store"]] == summary["points_upserted"]
    so_far = [line for line in lines if line["stage"] == STAGES["store"] and line["total"] is None]
    assert len(so_far) >= 3, proc.stderr  # several batches were written before the total was known


def test_progress_off_silences_the_lines(project: Repo) -> None:
    proc = _index(project.path, "--json", every="off")
    assert json.loads(proc.stdout)["files_indexed"] == N_FILES
    assert _progress(proc.stderr) == []


def test_the_daemon_logs_progress_of_a_sync_at_info(project: Repo, daemons: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITRAG_PROGRESS_INTERVAL", "0")  # the daemon inherits it
    daemons()
    log = Path(os.environ["GITRAG_HOME"] + "-daemon.log")
    start = log.stat().st_size
    proc = _index(project.path, "--json", every="off")  # routed: the daemon syncs
    summary = json.loads(proc.stdout)
    assert summary["files_indexed"] == N_FILES and _progress(proc.stderr) == []
    events = [dict(re.findall(r"(\w+)=(\S+)", line)) for line in
              log.read_text(errors="replace")[start:].splitlines() if "sync progress" in line]
    assert events and all("[info" in line for line in log.read_text()[start:].splitlines()
                          if "sync progress" in line)
    assert {e["branch"] for e in events} == {"main"}
    by_stage: dict[str, list[dict[str, str]]] = {}
    for e in events:
        by_stage.setdefault(e["stage"], []).append(e)
    assert {"chunk", "embed", "store"} <= set(by_stage)
    assert by_stage["chunk"][-1]["done"] == by_stage["chunk"][-1]["total"] == str(N_FILES)


SLOW_EMBEDDER = {"sleep": [["gitrag.index.embedders.hashing:HashEmbedder.embed_documents", 0.3]]}


@pytest.mark.parametrize("as_json", [True, False])
def test_a_routed_index_shows_the_daemons_progress_off_a_terminal(project: Repo, as_json: bool) -> None:
    """`gitrag index` handed to the running daemon still reports progress on stderr (polled
    over the socket), in the in-process lines' format; stdout keeps the summary alone."""
    from tests.daemonutil import stop_daemon
    from tests.reliability import start_daemon

    daemon = start_daemon(prelude=SLOW_EMBEDDER, env={"GITRAG_BATCH_SIZE": "8"})  # a few seconds of embedding
    try:
        proc = _index(project.path, *(["--json"] if as_json else []))
    finally:
        assert stop_daemon(daemon) == 0
    if as_json:
        assert json.loads(proc.stdout)["files_indexed"] == N_FILES and proc.stdout.count("\n") == 1
    else:
        assert "indexed by the running daemon" in proc.stderr
        assert re.fullmatch(r"main @ [0-9a-f]{12}: 40 files indexed.*\n", proc.stdout, re.S)
    assert "\x1b" not in proc.stderr
    lines = _progress(proc.stderr)
    assert lines and {line["label"] for line in lines} == {"indexing main"}, proc.stderr
    assert STAGES["embed"] in {line["stage"] for line in lines}
    assert all(line["total"] is None or line["done"] <= line["total"] for line in lines)


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_lines_come_at_most_once_per_interval() -> None:
    clock, got = _Clock(), []
    lines = Lines("indexing main", lambda line, fields: got.append((line, fields)), 5.0, clock)
    for t, done in ((1.0, 10), (4.9, 20), (5.0, 30), (7.0, 40), (10.5, 4300)):
        clock.now = 100.0 + t
        lines("embed", done, 4300)
    assert [g[0] for g in got] == ["indexing main: embedding chunks 30/4,300, 0%, 5 s",
                                   "indexing main: embedding chunks 4,300/4,300, 100%, 10 s"]
    assert got[1][1] == {"stage": "embed", "done": 4300, "total": 4300, "percent": 100, "seconds": 10.5}
    silent: list[Any] = []
    off = Lines("x", lambda *a: silent.append(a), None, clock)
    clock.now += 1000
    off("embed", 1, 2)
    assert silent == []


def test_format_and_interval_setting() -> None:
    line = format_line("indexing main", "embed", 1200, 4300, 41.7)
    assert line == "indexing main: embedding chunks 1,200/4,300, 27%, 41 s"
    assert LINE_RE.match(line)["stage"] == "embedding chunks"
    unknown = format_line("indexing main", "store", 26585, UNKNOWN, 41.7)
    assert unknown == "indexing main: writing points 26,585 so far, 41 s"
    m = LINE_RE.match(unknown)
    assert (m["stage"], m["done"], m["total"], m["percent"]) == ("writing points", "26,585", None, None)
    assert interval({}) == 5.0 and interval({"GITRAG_PROGRESS_INTERVAL": "0.5"}) == 0.5
    assert interval({"GITRAG_PROGRESS_INTERVAL": "off"}) is None
    for bad in ("soon", "nan", "5s"):
        with pytest.raises(ConfigError, match=f"GITRAG_PROGRESS_INTERVAL must be a number of seconds or off, got '{bad}'"):
            interval({"GITRAG_PROGRESS_INTERVAL": bad})
    assert interval({"GITRAG_PROGRESS_INTERVAL": "-3"}) == 0.0
