"""Corruption fuzz (issue 23): random byte flips, truncations and deletions across every
file under the data folder, each followed by ``gitrag ask`` and ``gitrag doctor``.

Each trial damages one file of a live index (the real engine's segment files and WAL, the
SQLite state and vector cache, the registry and lock files), then asks the same questions
as before the damage and runs plain ``doctor``; when the answers are not back, the
command the error named (``gitrag index --rebuild``), else a plain ``gitrag index``,
follows and the questions are asked again. A trial counts as

- **detected** when something said so: a check (doctor FAIL, a dropped cache row, a
  damaged collection rebuilt) or a one-line error;
- **healed** when the answers equal those before the damage at the end of the trial;
- **wrong** when an ``ask`` exited 0 with other answers than before the damage (goal 0);
- **internal** when a command exited 3 (goal 0).

A damage that changes nothing anyone reads (a flipped byte in a preallocated, unused part of
a file) is neither detected nor wrong: it is harmless. The commands run in-process
(click's runner), so a trial costs a few hundred ms (a damaged collection's rebuild most of
it). Trials: ``GITRAG_FUZZ_TRIALS`` (default 100, ~2 min); seeds: ``GITRAG_FUZZ_SEED``
(default 23; several, comma-separated, run one after the other: ``GITRAG_FUZZ_SEED=7,1``).
"""

from __future__ import annotations

import json
import os
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitrag import config
from gitrag.surfaces.cli import cli
from tests.gitutil import Repo
from tests.reliability import commit_a, record

GROUP = "integrity"
TRIALS = int(os.environ.get("GITRAG_FUZZ_TRIALS", "100"))
SEEDS = [int(s) for s in os.environ.get("GITRAG_FUZZ_SEED", "23").split(",") if s.strip()]
QUESTIONS = ["how is gamma computed"]


@dataclass
class Tally:
    trials: int = 0
    detected: int = 0
    healed: int = 0
    wrong: int = 0
    internal: int = 0
    harmless: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


def _invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=True)
    code = result.exit_code if result.exception is None or isinstance(result.exception, SystemExit) else 3
    return code, result.stdout, result.stderr


def _answers(path: Path) -> tuple[list[list[tuple[str, int, float]]] | None, int, str]:
    """(answers or None when an ask failed, the worst exit code, stderr)."""
    out, worst, err = [], 0, ""
    for q in QUESTIONS:
        code, stdout, stderr = _invoke("ask", q, "--json", "--no-answer", "--repo", str(path))
        worst, err = max(worst, code), err + stderr
        if code != 0:
            return None, worst, err
        out.append([(r["path"], r["start_line"], round(r["score"], 3)) for r in json.loads(stdout)["results"]])
    return out, worst, err


def _damage(rng: random.Random, files: list[Path]) -> tuple[str, Path]:
    target = rng.choice(files)
    kind = rng.choice(["flip", "flip", "truncate", "delete"])
    try:
        size = target.stat().st_size
        if kind == "delete" or size == 0:
            target.unlink()
            kind = "delete"
        elif kind == "truncate":
            os.truncate(target, rng.randrange(size))
        else:
            with open(target, "r+b") as fh:  # mostly where the data is (file starts), sometimes anywhere
                for _ in range(rng.randint(1, 8)):
                    at = rng.randrange(min(size, 65536)) if rng.random() < 0.8 else rng.randrange(size)
                    fh.seek(at)
                    byte = fh.read(1)
                    fh.seek(at)
                    fh.write(bytes([(byte[0] if byte else 0) ^ (1 << rng.randrange(8))]))
    except FileNotFoundError:
        pass
    return kind, target


@pytest.mark.timeout(max(300, 4 * TRIALS))  # ~1.2 s a trial on a loaded machine, a bound of 4
@pytest.mark.parametrize("seed", SEEDS, ids=[f"seed{s}" for s in SEEDS])
def test_corruption_fuzz(repo: Repo, seed: int) -> None:
    commit_a(repo)
    assert _invoke("index", "--repo", str(repo.path))[0] == 0
    want, code, err = _answers(repo.path)
    assert want is not None and code == 0, err
    rng = random.Random(seed)
    t = Tally()
    for trial in range(TRIALS):
        files = sorted(p for p in config.data_root().rglob("*") if p.is_file())
        kind, target = _damage(rng, files)
        kind_at = f"{kind} {target.relative_to(config.data_root())}"
        t.trials += 1
        t.by_kind[kind] = t.by_kind.get(kind, 0) + 1
        got, worst, err = _answers(repo.path)
        dcode, dout, derr = _invoke("doctor", "--repo", str(repo.path))
        said = (worst != 0 or "damaged" in err or "dropped" in err or "failed their digest" in err
                or "FAIL integrity" in dout or "FAIL lag" in dout)
        internal = worst == 3 or dcode == 3
        if got is not None and got != want:
            t.wrong += 1
            t.failures.append(f"trial {trial}: {kind_at}: wrong answers served")
        if got != want:  # the fix the one-line error named, else a plain index
            _invoke("index", *(["--rebuild"] if "--rebuild" in err else []), "--repo", str(repo.path))
            got, worst2, err2 = _answers(repo.path)
            internal = internal or worst2 == 3
            err += err2
        if internal:
            t.internal += 1
            t.failures.append(f"trial {trial}: {kind_at}: internal error: {(err + derr)[-300:]}")
        if said:
            t.detected += 1
        if got == want:
            t.healed += 1
            if not said:
                t.harmless += 1
        else:  # not back after an index: start again from scratch, so the next trial is independent
            t.failures.append(f"trial {trial}: {kind_at}: not healed: {err[-300:]}")
            shutil.rmtree(config.data_root(), ignore_errors=True)
            assert _invoke("index", "--repo", str(repo.path))[0] == 0
    summary = (f"{t.trials} trials ({', '.join(f'{n} {k}' for k, n in sorted(t.by_kind.items()))}): "
               f"{t.detected} detected, {t.healed} healed ({t.harmless} of them harmless: nothing read changed), "
               f"{t.wrong} wrong answers served, {t.internal} internal errors")
    print(summary)
    for line in t.failures[:20]:
        print(line)
    assert t.internal == 0 and t.wrong == 0, "\n".join(t.failures[:20])
    assert t.healed == t.trials, "\n".join(t.failures[:20])
    record(f"corruption fuzz, seed {seed}: random byte flips, truncations and deletions of any file under the "
           f"data folder, each followed by ask and doctor", summary, 0, t.wrong, GROUP)
