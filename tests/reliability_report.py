"""Run the reliability tests and print the table of RELIABILITY.md from what they checked.

    python tests/reliability_report.py            # print the table (markdown)
    python tests/reliability_report.py --write    # also replace the table in RELIABILITY.md
    python tests/reliability_report.py --write --only tests/test_reliability_fuzz.py ...
        # run those test files only; their rows replace theirs in the table, the rest stay

Each test calls ``tests.reliability.record(fault, outcome, lost, wrong)`` after its
assertions passed, so a row exists only for a fault that was tried and whose counts were
asserted; a test that failed or was skipped shows as such. "lost" and "wrong" are the
points missing from, or differing from, a from-scratch index of the same commit ("–" where
the fault is refused before it reaches an index).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REUSED = {  # faults the brief lists that tests elsewhere already cover
    "tests/test_daemon.py::test_one_daemon_wins_and_a_stale_socket_is_replaced": (
        "process", "two daemons started at once",
        "one wins; the other exits 1: a gitrag daemon (pid N) already runs … stop it first"),
}
GROUPS = ["bad input", "hooks", "embedder (Ollama)", "store and state", "integrity", "process", "socket", "security",
          "agents", "messages", "offline"]
START, END = "<!-- reliability-table:start -->", "<!-- reliability-table:end -->"


def run_tests(log: Path, junit: Path, extra: list[str], only: list[str] | None = None) -> int:
    tests = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("test_reliability_*.py"))
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}",
           *(only if only else [*tests, *REUSED]), *extra]
    env = {**os.environ, "RELIABILITY_LOG": str(log)}
    return subprocess.run(cmd, cwd=ROOT, env=env, check=False).returncode


def results(junit: Path) -> tuple[dict[str, str], float]:
    """{node id: passed | failed | skipped: reason} and the total seconds."""
    out: dict[str, str] = {}
    total = 0.0
    for case in ET.parse(junit).getroot().iter("testcase"):
        node = case.get("classname", "").replace(".", "/") + ".py::" + case.get("name", "")
        total += float(case.get("time", 0))
        skipped = case.find("skipped")
        if skipped is not None:
            out[node] = f"skipped: {skipped.get('message', '')}"
        elif case.find("failure") is not None or case.find("error") is not None:
            out[node] = "FAILED"
        else:
            out[node] = "passed"
    return out, total


def _count(value: int | None) -> str:
    return "–" if value is None else str(value)


def table(records: list[dict[str, object]], outcome: dict[str, str]) -> str:
    rows = [(r["group"], r["fault"], r["outcome"], _count(r["lost"]), _count(r["wrong"]), r["test"])
            for r in records]
    for node, (group, fault, what) in REUSED.items():
        rows.append((group, fault, what, "–", "–", node))
    recorded = {r["test"] for r in records} | set(REUSED)
    for node, state in outcome.items():
        if node not in recorded and state != "passed":
            rows.append(("?", node.split("::")[-1], state, "–", "–", node))
    rows.sort(key=lambda r: GROUPS.index(str(r[0])) if r[0] in GROUPS else len(GROUPS))
    lines = ["| group | fault or bad input | outcome | lost | wrong | test |", "|---|---|---|---|---|---|"]
    for group, fault, what, lost, wrong, node in rows:
        state = outcome.get(str(node), "not run")
        mark = "" if state == "passed" else f" **{state}**"
        test = str(node).replace("tests/", "").replace(".py::", "::")
        lines.append(f"| {group} | {_cell(fault)} | {_cell(what)}{mark} | {lost} | {wrong} | `{test}` |")
    return "\n".join(lines)


def _cell(value: object) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="replace the table in RELIABILITY.md")
    parser.add_argument("--only", nargs="+", metavar="TEST_FILE",
                        help="run only these test files; with --write their rows replace theirs, the others stay")
    args, extra = parser.parse_known_args()
    with tempfile.TemporaryDirectory() as tmp:
        log, junit = Path(tmp) / "records.jsonl", Path(tmp) / "junit.xml"
        code = run_tests(log, junit, extra, args.only)
        records = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        outcome, seconds = results(junit)
    passed = sum(1 for s in outcome.values() if s == "passed")
    body = table(records, outcome)
    summary = (f"{len(outcome)} tests ({passed} passed) in {seconds:.0f} s of test time; "
               f"{len(records)} faults recorded; points lost in total: "
               f"{sum(int(r['lost'] or 0) for r in records)}, wrong: {sum(int(r['wrong'] or 0) for r in records)}.")
    print(body + "\n\n" + summary)
    if args.write:
        path = ROOT / "RELIABILITY.md"
        text = path.read_text()
        head, _, rest = text.partition(START)
        old, _, tail = rest.partition(END)
        if args.only:
            body, summary = _merged(old, body, args.only, summary)
        path.write_text(f"{head}{START}\n{body}\n\n{summary}\n{END}{tail}")
    return code


def _merged(old: str, new: str, files: list[str], summary: str) -> tuple[str, str]:
    """The table ``old`` with the rows of the test ``files`` replaced by ``new``'s (in group
    order), and the summary: the old full run's line, then this partial run's."""
    names = {Path(f).stem for f in files}
    lines = [line for line in old.strip().splitlines() if line.startswith("|")]
    notes = [line for line in old.strip().splitlines() if line and not line.startswith("|")]

    def test_of(line: str) -> str:
        return line.rsplit("`", 2)[-2].split("::")[0] if line.count("`") >= 2 else ""

    kept = [line for line in lines[2:] if test_of(line) not in names]
    fresh = [line for line in new.splitlines()[2:] if test_of(line) in names]
    group = {g: i for i, g in enumerate(GROUPS)}
    rows = sorted(kept + fresh, key=lambda line: group.get(line.split(" | ")[0].lstrip("| ").strip(), len(GROUPS)))
    full = next((n for n in notes if " tests (" in n and "faults recorded" in n), "")
    partial = (f"Rows of {', '.join(sorted(names))} from a run of those files alone "
               f"(`tests/reliability_report.py --write --only ...`): {summary}")
    return "\n".join(lines[:2] + rows), (full + "\n\n" + partial).strip()


if __name__ == "__main__":
    sys.exit(main())
