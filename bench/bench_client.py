"""The client's CPU per ``gitrag ask`` with the daemon up, for two or more gitrag checkouts side
by side, each run as an installed package is (no editable-install finder, byte-compiled).

    python bench/bench_client.py --tree DIR --code LABEL=DIR --code LABEL=DIR [--runs 21] [--record FILE]

For each ``--code`` (a checkout holding ``gitrag/``, e.g. ``git archive main | tar -x -C /tmp/base``):
a bare virtualenv whose ``.pth`` files name that checkout and this interpreter's
site-packages (the dependencies: no ``__editable__`` finder, which an editable install runs
in every process, ~15-25 ms), its modules byte-compiled (``compileall``: with
``PYTHONDONTWRITEBYTECODE=1`` and no ``__pycache__`` each client would compile from source),
a GITRAG_HOME of its own, ``gitrag index`` of ``--tree`` and a daemon (the build ids differ,
so each code needs its own). Then ``--runs`` rounds, interleaved code by code, of
``gitrag ask QUESTION --no-answer --repo TREE`` through the console-script form
(``python -c 'from gitrag.surfaces.entry import main; main()'``, what pip's wrapper runs),
and of ``python -c pass`` in the same virtualenv (the interpreter's floor): user+sys CPU ms
by ``os.wait4``, median and quartiles. The 1-minute load average is recorded: CPU times
are inflated by a loaded machine, the side-by-side ratio is the figure to read.

The embedder is what the settings say (GITRAG_EMBEDDER passes through).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

QUESTIONS = ["how are options parsed", "where is the help text formatted", "how does a command invoke its callback",
             "what happens when an argument is missing", "where are environment variables read"]
_ENTRY = "from gitrag.surfaces.entry import main; main()"
_OLD_ENTRY = "from gitrag.surfaces.cli import main; main()"  # checkouts from before gitrag.surfaces.entry


def venv_for(code: Path, where: Path) -> Path:
    """A bare virtualenv at ``where`` seeing ``code`` and this interpreter's dependencies; its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    site = next((where / "lib").glob("python3*/site-packages"))
    (site / "gitrag-code.pth").write_text(f"{code}\n")
    (site / "gitrag-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(code / "gitrag")], check=True,
                   stdout=subprocess.DEVNULL, env={k: v for k, v in os.environ.items()
                                                   if k != "PYTHONDONTWRITEBYTECODE"})
    return where / "bin" / "python"


def cpu_ms(cmd: list[str], env: dict[str, str]) -> float:
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/")
    _, status, ru = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd[:4])} ... failed (exit {os.waitstatus_to_exitcode(status)})")
    return 1000 * (ru.ru_utime + ru.ru_stime)


def summary(values: list[float]) -> dict[str, float]:
    q = statistics.quantiles(values, n=4)
    return {"median_ms": round(statistics.median(values), 1), "p25_ms": round(q[0], 1), "p75_ms": round(q[2], 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", required=True, type=Path, help="the git work tree to index and ask")
    ap.add_argument("--code", action="append", required=True, help="LABEL=DIR: a gitrag checkout (repeatable)")
    ap.add_argument("--runs", type=int, default=21, help="interleaved rounds (default: %(default)s)")
    ap.add_argument("--record", type=Path, metavar="FILE", help="also write the figures as a results file")
    args = ap.parse_args()
    tree = args.tree.resolve()
    work = Path(tempfile.mkdtemp(prefix="bench-client-"))
    codes: dict[str, dict[str, Any]] = {}
    daemons = []
    try:
        for n, spec in enumerate(args.code):
            label, code = spec.split("=", 1)
            python = venv_for(Path(code).resolve(), work / f"venv{n}")
            home = work / f"home{n}"
            env = {k: v for k, v in os.environ.items() if not k.startswith("GITRAG_") or k == "GITRAG_EMBEDDER"}
            env.update(GITRAG_HOME=str(home), GITRAG_PROGRESS_INTERVAL="off", XDG_CONFIG_HOME=str(home / "config"))
            env.pop("XDG_RUNTIME_DIR", None)
            env.pop("PYTHONPATH", None)
            entry = _ENTRY if (Path(code) / "gitrag/surfaces/entry.py").exists() else _OLD_ENTRY
            subprocess.run([str(python), "-c", entry, "index", "--repo", str(tree)], env=env, check=True,
                           stdout=subprocess.DEVNULL, cwd="/")  # not this checkout: `-c` puts the cwd first
            log = (work / f"daemon{n}.log").open("ab")
            daemons.append(subprocess.Popen([str(python), "-c", entry, "daemon"], env=env, stdin=subprocess.DEVNULL,
                                            stdout=log, stderr=log, cwd="/"))
            codes[label] = {"python": str(python), "env": env, "entry": entry, "ask": [], "floor": []}
        for c in codes.values():  # the daemon up and warm: one answered question each
            deadline = time.monotonic() + 120
            while True:
                try:
                    cpu_ms([c["python"], "-c", c["entry"], "ask", QUESTIONS[0], "--no-answer", "--repo", str(tree)],
                           c["env"])
                    break
                except SystemExit:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
        load_before = os.getloadavg()[0]
        for i in range(args.runs):
            q = QUESTIONS[i % len(QUESTIONS)]
            for c in codes.values():
                c["ask"].append(cpu_ms([c["python"], "-c", c["entry"], "ask", q, "--no-answer", "--repo", str(tree)],
                                       c["env"]))
                c["floor"].append(cpu_ms([c["python"], "-c", "pass"], c["env"]))
        load_after = os.getloadavg()[0]
    finally:
        for d in daemons:
            d.terminate()
            d.wait(timeout=30)
    rows = {label: {"client CPU ms per ask (median, p25-p75)": summary(c["ask"]),
                    "interpreter alone, python -c pass": summary(c["floor"])} for label, c in codes.items()}
    print(f"tree {tree.name}, {args.runs} interleaved rounds, load {load_before:.1f} -> {load_after:.1f}")
    for label, row in rows.items():
        a, f = row["client CPU ms per ask (median, p25-p75)"], row["interpreter alone, python -c pass"]
        print(f"  {label:12} ask {a['median_ms']:6.1f} ms ({a['p25_ms']:.1f}-{a['p75_ms']:.1f}); "
              f"python -c pass {f['median_ms']:.1f} ms")
    if args.record:
        import record

        record.write(args.record, title="Client CPU per ask with the daemon up", issue=21, subject="queries",
                     tables=[record.side_by_side(f"{tree.name}, {args.runs} interleaved rounds, load "
                                                 f"{load_before:.1f} -> {load_after:.1f}", rows)])


if __name__ == "__main__":
    main()
