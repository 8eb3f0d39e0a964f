"""Run the reliability tests and print the table of RELIABILITY.md from what they checked.

    python tests/reliability_report.py            # print the table (markdown)
    python tests/reliability_report.py --write    # also replace the table in RELIABILITY.md

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


def run_tests(log: Path, junit: Path, extra: list[str]) -> int:
    tests = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("test_reliability_*.py"))
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}",
           *tests, *REUSED, *extra]
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
    args, extra = parser.parse_known_args()
    with tempfile.TemporaryDirectory() as tmp:
        log, junit = Path(tmp) / "records.jsonl", Path(tmp) / "junit.xml"
        code = run_tests(log, junit, extra)
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
        _, _, tail = rest.partition(END)
        path.write_text(f"{head}{START}\n{body}\n\n{summary}\n{END}{tail}")
    return code


if __name__ == "__main__":
    sys.exit(main())
