"""Run the README's documented commands on this repository and print their real output,
so the README's sample output can be refreshed from a real run (never written by hand).

    .venv/bin/python scripts/readme_samples.py [--question TEXT] [--only index,ask,...]

Works on a clone of this repository's HEAD in a temporary folder, with a temporary
GITRAG_HOME, so it installs no hook here and touches no index of yours. Each command is
printed as ``$ gitrag ...`` followed by its stdout, its stderr (marked ``[stderr]``) and
its wall time on this machine, ready to paste.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The demo's question, in a file .gitragignore keeps out of the index (else it answers itself).
QUESTION = (ROOT / "scripts" / "demo-question.txt").read_text(encoding="utf-8").strip()
STEPS = ("index", "reindex", "ask", "ask-json", "index-json", "status", "status-json", "gc", "gc-json",
         "doctor", "doctor-json", "install", "uninstall")


def run(args: list[str], cwd: Path, env: dict[str, str], pretty_json: bool = False) -> None:
    """Print ``$ gitrag ARGS``, then what it printed and how long it took."""
    shown = " ".join(a if a.replace("-", "").replace("/", "").replace(".", "").isalnum() else repr(a) for a in args)
    print(f"$ gitrag {shown}")
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-P", "-m", "gitrag", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL)
    seconds = time.perf_counter() - t0
    out = proc.stdout
    if pretty_json and out.strip():
        out = json.dumps(json.loads(out), indent=2, ensure_ascii=False) + "\n"
    sys.stdout.write(out)
    for line in proc.stderr.splitlines():
        print(f"[stderr] {line}")
    print(f"[exit {proc.returncode}, {seconds:.1f} s]\n", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--question", default=QUESTION)
    parser.add_argument("--only", default=",".join(STEPS), help="comma-separated steps: " + ", ".join(STEPS))
    parser.add_argument("--click-corpus", type=Path, help="also run `gitrag eval --json` of the click question set "
                        "on this corpus (built by bench/eval/make_corpus.sh click==8.1.7 DIR)")
    opts = parser.parse_args()
    steps = set(opts.only.split(","))
    work = Path(tempfile.mkdtemp(prefix="gitrag-samples-"))
    try:
        clone = work / "gitrag"
        subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(clone)], check=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("GITRAG_")} | {"GITRAG_HOME": str(work / "home")}
        env["PYTHONPATH"] = str(ROOT)  # this checkout's gitrag, whatever is installed
        env["COLUMNS"] = "100"
        print(f"# {subprocess.run(['git', 'log', '-1', '--format=%h %s'], cwd=clone, capture_output=True, text=True).stdout.strip()}")
        print(f"# os.cpu_count() = {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}\n")
        q = opts.question
        plan = [
            ("index", ["index", "--repo", "."], False),
            ("reindex", ["index", "--repo", "."], False),
            ("ask", ["ask", q, "--repo", ".", "-k", "5"], False),
            ("ask-json", ["ask", q, "--repo", ".", "-k", "2", "--json"], True),
            ("index-json", ["index", "--repo", ".", "--json"], True),
            ("status", ["status", "--repo", "."], False),
            ("status-json", ["status", "--repo", ".", "--json"], True),
            ("gc", ["gc", "--repo", "."], False),
            ("gc-json", ["gc", "--repo", ".", "--json"], True),
            ("doctor", ["doctor", "--repo", "."], False),
            ("doctor-json", ["doctor", "--repo", ".", "--json"], True),
            ("install", ["install", "--repo", ".", "--no-systemd"], False),
            ("uninstall", ["uninstall", "--repo", "."], False),
        ]
        for name, args, pretty in plan:
            if name in steps:
                run(args, clone, env, pretty)
        if opts.click_corpus:
            corpus = work / "click"
            shutil.copytree(opts.click_corpus, corpus, symlinks=True)
            run(["eval", str(ROOT / "bench/eval/click-8.1.7.jsonl"), "--repo", ".", "--mode", "hybrid", "--mode", "grep",
                 "--json"], corpus, env, True)
    finally:
        subprocess.run([sys.executable, "-P", "-m", "gitrag", "daemon", "--stop"], env={**os.environ, "GITRAG_HOME": str(work / "home"),
                       "PYTHONPATH": str(ROOT)}, capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
