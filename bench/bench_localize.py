"""Localization on real issues: issue text -> the files and functions its fix changes, gitrag against BM25.

    python bench/bench_localize.py --mirrors DIR [--embedder static|local] [--lang L] [--repo R]
        [--limit N] [--per-repo N] [--results FILE] [--json]

The question sets are bench/eval/localize/*.jsonl (one per language; README.md there says
where they come from). For each repository the script makes a work clone that shares the
objects of its git dir under ``--mirrors`` (``DIR/owner+name/repo``, ``DIR/owner+name``,
``DIR/owner__name`` or ``DIR/name``; or ``--repo-path owner/name=PATH``) and downloads
nothing. It checks out the issues' base commits oldest first, so each index after the
first is gitrag's own incremental sync of what changed between two base commits, and
asks each issue text at its base commit (repositories cheapest first: fewest files to
index, so an interrupted run has scored the most issues; ``--summarize`` prints the table
of its ``--results``; ``--diagnose`` counts the kinds of wrong top files and ``--misses``
lists every issue whose first file is wrong). HEAD is moved with ``git update-ref --no-deref``
(a detached HEAD; no checkout: gitrag indexes commits, and a clone whose largest blobs
are missing still indexes, those files skipped as unreadable):

- **gitrag**: ``ask --files`` in-process (gitrag.query.retrieval.ask, files=True): the ranked
  files give file Acc@k, the top 5 chunks give function recall@5;
- **BM25 over functions**: Okapi BM25 (k1 = 1.2, b = 0.75, Lucene's idf; a small
  implementation here) over the code chunks of the same index (the branch's points in a
  programming language, their text read from the git blobs; prose, config and text
  chunks left out), identifiers split
  at case changes, digits and underscores and lowercased; files rank by their best chunk,
  as ``ask --files`` ranks them.

File Acc@k (k = 1, 3, 5, 10): the share of issues with at least one gold file among the
top k files. Function recall@5: the share of an issue's gold definitions (bench set
``functions``) that one of the top 5 chunks overlaps (same path, line spans overlap),
averaged over issues. Figures per language and overall (every issue counts once).

A private GITRAG_HOME is made for the run unless ``--home`` names one (a warm home
reuses the vector cache between runs). ``--results FILE`` writes one JSON line per
issue (both methods' top 10 files, top 5 chunks, the gold) for diagnosis. Progress goes
to stderr; the table (or ``--json``) to stdout.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SETS = ROOT / "bench" / "eval" / "localize"
KS = (1, 3, 5, 10)
# the chunker's programming languages (gitrag.index.chunking.languages); BM25 ranks only their chunks
CODE_LANGS = {"python", "javascript", "typescript", "tsx", "go", "rust", "java", "kotlin", "c", "cpp", "csharp",
              "php", "ruby"}
FUNC_K = 5


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# -- the question sets -------------------------------------------------------------------

def load_sets(folder: Path, langs: list[str], repos: list[str]) -> list[dict]:
    rows = []
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                rows.append(json.loads(line))
    if langs:
        rows = [r for r in rows if r["language"] in langs]
    if repos:
        want = {x.lower() for x in repos}
        rows = [r for r in rows if r["repo"].lower() in want]
    return sorted(rows, key=lambda r: (r["repo"].lower(), r["base_time"], r["id"]))


def find_gitdir(mirrors: Path | None, repo: str, paths: dict[str, Path]) -> Path | None:
    if repo.lower() in paths:
        return paths[repo.lower()]
    if mirrors is None or not mirrors.is_dir():
        return None
    owner, name = repo.lower().split("/", 1)
    entries = {p.name.lower(): p for p in mirrors.iterdir()}
    for key in (f"{owner}+{name}", f"{owner}__{name}", name):
        base = entries.get(key)
        if base is not None:
            for cand in (base / "repo", base, base / ".git"):
                if (cand / "objects").is_dir():
                    return cand
    return None


def git(cwd: Path, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout


def _index_cost(gitdir: Path | None, issues: list[dict]) -> int:
    """Files a run indexes for ``issues`` (oldest first): all at the first base commit, then
    those changed between successive ones. 0 without a git dir."""
    if gitdir is None:
        return 0

    def names(*args: str) -> int:
        proc = subprocess.run(["git", "--git-dir", str(gitdir), *args], capture_output=True, text=True)
        return len(proc.stdout.splitlines()) if proc.returncode == 0 else 0

    total = names("ls-tree", "-r", "--name-only", issues[0]["base_commit"])
    for a, b in zip(issues, issues[1:]):
        total += names("diff", "--name-only", a["base_commit"], b["base_commit"])
    return total


def work_clone(gitdir: Path, dest: Path) -> None:
    """A clone of ``gitdir`` at ``dest`` that borrows its objects (git clone --shared):
    local, nothing is copied or downloaded."""
    if (dest / ".git").exists():
        return
    dest.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "clone", "-q", "--shared", "--no-checkout", str(gitdir), str(dest)], check=True,
                   capture_output=True)
    git(dest, "config", "user.email", "bench@localhost")
    git(dest, "config", "user.name", "bench")


# -- BM25 over the index's chunks ----------------------------------------------------------

_WORD = re.compile(r"[A-Za-z0-9]+")
_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def tokens(text: str) -> list[str]:
    """Words of ``text`` (split at anything not a letter or digit, so at ``_``) lowercased;
    a word with case changes or digits also gives its parts (``parseRange_v2`` ->
    parserange, parse, range, v2, v, 2)."""
    out = []
    for w in _WORD.findall(text):
        low = w.lower()
        out.append(low)
        parts = _CAMEL.findall(w)
        if len(parts) > 1:
            out.extend(p.lower() for p in parts)
    return out


class BM25:
    """Okapi BM25 over one snapshot's chunks (k1 = 1.2, b = 0.75; idf = ln(1 + (N - df +
    0.5) / (df + 0.5)), as Lucene). Token lists are cached by chunk across snapshots."""

    K1, B = 1.2, 0.75

    def __init__(self) -> None:
        self.cache: dict[tuple[str, int, int], Counter] = {}

    def index(self, ws) -> None:
        branch = ws.repo.branch()
        rows = ws.state.points(branch)
        self.docs: list[dict] = []
        self.tfs: list[Counter] = []
        blobs: dict[str, bytes] = {}
        for row in rows:
            p = row.payload
            if p.get("language") not in CODE_LANGS:  # over functions: docs, config and text are left out
                continue
            key = (p["blob"], p["start_byte"], p["end_byte"])
            tf = self.cache.get(key)
            if tf is None:
                data = blobs.get(p["blob"])
                if data is None:
                    try:
                        data = ws.repo.read_blob(p["blob"])
                    except (KeyError, ValueError):
                        data = b""
                    blobs = {p["blob"]: data}  # points come grouped by path: keep one blob
                text = data[p["start_byte"]:p["end_byte"]].decode("utf-8", "replace")
                tf = Counter(tokens(p["path"] + " " + (p.get("symbol") or "") + " " + text))
                self.cache[key] = tf
            self.docs.append(p)
            self.tfs.append(tf)
        self.postings: dict[str, list[tuple[int, int]]] = defaultdict(list)
        self.lengths = [sum(tf.values()) for tf in self.tfs]
        for i, tf in enumerate(self.tfs):
            for term, n in tf.items():
                self.postings[term].append((i, n))
        self.avg = (sum(self.lengths) / len(self.lengths)) if self.lengths else 1.0

    def search(self, query: str, k: int) -> list[tuple[float, dict]]:
        n_docs = len(self.docs)
        scores: dict[int, float] = defaultdict(float)
        for term in Counter(tokens(query)):  # each distinct term once
            post = self.postings.get(term)
            if not post:
                continue
            idf = math.log(1 + (n_docs - len(post) + 0.5) / (len(post) + 0.5))
            for i, n in post:
                norm = n * (self.K1 + 1) / (n + self.K1 * (1 - self.B + self.B * self.lengths[i] / self.avg))
                scores[i] += idf * norm
        best = sorted(scores.items(), key=lambda kv: (-kv[1], self.docs[kv[0]]["path"], self.docs[kv[0]]["start_line"]))
        return [(s, self.docs[i]) for i, s in best[:k]]


def files_of(chunks: list[tuple[float, str]], k: int) -> list[str]:
    """Files ranked by their best chunk (chunks best first)."""
    out: list[str] = []
    for _, path in chunks:
        if path not in out:
            out.append(path)
            if len(out) == k:
                break
    return out


# -- scoring ------------------------------------------------------------------------------

def score(gold_files: list[str], gold_funcs: list[dict], files: list[str], chunks: list[tuple[str, int, int]]) -> dict:
    gold = set(gold_files)
    first = next((i + 1 for i, f in enumerate(files) if f in gold), None)
    out = {f"acc@{k}": float(first is not None and first <= k) for k in KS}
    out["first_rank"] = first
    if gold_funcs:
        top = chunks[:FUNC_K]
        hit = [any(p == g["path"] and s <= g["end_line"] and g["start_line"] <= e for p, s, e in top)
               for g in gold_funcs]
        out[f"func_recall@{FUNC_K}"] = sum(hit) / len(hit)
        out["funcs_hit"] = [g["symbol"] for g, h in zip(gold_funcs, hit) if h]
    return out


def summarize(rows: list[dict], method: str) -> dict:
    keys = [f"acc@{k}" for k in KS] + [f"func_recall@{FUNC_K}"]
    out: dict = {"n": len(rows)}
    for key in keys:
        vals = [r[method][key] for r in rows if key in r[method]]
        out[key] = 100.0 * sum(vals) / len(vals) if vals else float("nan")
    return out


# -- diagnosis of misses ---------------------------------------------------------------------

_CHANGELOG = re.compile(r"(^|/)(CHANGELOG|CHANGES|HISTORY|NEWS|RELEASE[-_ ]?NOTES)[^/]*$", re.I)
_DOC_EXT = (".md", ".rst", ".txt", ".adoc", ".markdown")
_CONFIG = re.compile(r"(\.(toml|ya?ml|json|cfg|ini|gradle|xml|properties|lock)$|(^|/)(Makefile|CMakeLists\.txt|"
                     r"Cargo\.toml|setup\.py|pom\.xml|package\.json|tox\.ini)$)", re.I)


def _builder():
    """bench/eval/localize/build.py as a module (its test-path and language rules)."""
    if "localize_build" not in sys.modules:
        from importlib import util

        spec = util.spec_from_file_location("localize_build", SETS / "build.py")
        module = util.module_from_spec(spec)
        sys.modules["localize_build"] = module
        spec.loader.exec_module(module)
    return sys.modules["localize_build"]


def file_kind(path: str) -> str:
    """What kind of file ``path`` is, by path convention: changelog, docs, ci
    (``.github/``), tests, examples, generated copy (``singleheader/``, amalgamations,
    ``dist/``, minified), declaration (``.d.ts``, ``.pyi``, ``*.types.ts``,
    ``__init__.py``), header (C/C++), config (build and settings files) or code."""
    build = _builder()
    low = path.lower()
    name = path.rsplit("/", 1)[-1]
    if _CHANGELOG.search(path):
        return "changelog"
    if low.startswith(".github/"):
        return "ci"
    if low.endswith(_DOC_EXT) or re.search(r"(^|/)(docs?|documentation|man)/", low):
        return "docs"
    if build.is_test_path(path):
        return "tests"
    if re.search(r"(^|/)(examples?|samples?|demos?|tutorials?)/", low):
        return "examples"
    if re.search(r"(^|/)(singleheader|amalgamat\w*|dist|generated|gen)/|\.min\.[jc]ss?$|amalgamat", low):
        return "generated copy"
    if low.endswith((".d.ts", ".pyi", ".types.ts")) or name == "__init__.py":
        return "declaration"
    if low.endswith((".h", ".hpp", ".hh", ".hxx")):
        return "header"
    if _CONFIG.search(path):
        return "config"
    return "code" if build.code_language(path) else "other"


def diagnose(rows: list[dict]) -> dict:
    """For each method and language, what the wrong first files are (a count per
    :func:`file_kind`, and how many sit in a folder of a gold file), and where the gold
    file was ranked instead."""
    out: dict = {}
    kinds_cache: dict[str, str] = {}

    def kind(path: str) -> str:
        if path not in kinds_cache:
            kinds_cache[path] = file_kind(path)
        return kinds_cache[path]

    for method in ("gitrag", "bm25"):
        per: dict = defaultdict(lambda: {"misses@1": 0, "top1_kind": Counter(), "top3_wrong_kind": Counter(),
                                          "top1_same_folder": 0, "gold_rank": Counter()})
        for r in rows:
            files = r[f"{method}_files"]
            gold = set(r["gold_files"])
            if files and files[0] in gold:
                continue
            for lang in (r["language"], "overall"):
                d = per[lang]
                d["misses@1"] += 1
                if files:
                    d["top1_kind"][kind(files[0])] += 1
                    folders = {g.rsplit("/", 1)[0] for g in gold}
                    d["top1_same_folder"] += files[0].rsplit("/", 1)[0] in folders
                for f in files[:3]:
                    if f not in gold:
                        d["top3_wrong_kind"][kind(f)] += 1
                first = r[method]["first_rank"]
                d["gold_rank"]["none in top 10" if first is None else f"rank {first}"] += 1
        out[method] = {lang: {k: (dict(v.most_common()) if isinstance(v, Counter) else v) for k, v in d.items()}
                       for lang, d in sorted(per.items())}
    return out


def misses(rows: list[dict], method: str = "gitrag") -> str:
    """One block per issue whose first file under ``method`` is not gold, grouped by language:
    the issue id, the rank of its first gold file (``-`` when not in the top 10), the top 3
    files with their :func:`file_kind`, whether each shares a gold file's folder, and the
    chunks of the top 5 that put them there (``gitrag`` rows only; BM25 rows hold their own)."""
    out: list[str] = []
    by_lang: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        files = r.get(f"{method}_files") or []
        if not files or files[0] not in set(r["gold_files"]):
            by_lang[r["language"]].append(r)
    for lang, items in sorted(by_lang.items()):
        out.append(f"## {lang}: {len(items)} misses at rank 1 ({method})")
        for r in items:
            gold = r["gold_files"]
            folders = {g.rsplit("/", 1)[0] if "/" in g else "" for g in gold}
            first = r[method]["first_rank"]
            out.append(f"- {r['id']}: gold {', '.join(gold)} at rank {first if first else '-'}")
            for i, f in enumerate((r.get(f"{method}_files") or [])[:3], 1):
                folder = f.rsplit("/", 1)[0] if "/" in f else ""
                near = " (gold's folder)" if folder in folders and f not in gold else ""
                mark = " GOLD" if f in gold else ""
                chunks = [c.split(" ", 1)[1] if " " in c else c for c in r.get(f"{method}_chunks", [])
                          if c.split(":", 1)[0] == f]
                why = f"; chunks {' | '.join(chunks[:2])}" if chunks else ""
                out.append(f"    {i}. {f} [{file_kind(f)}]{near}{mark}{why}")
    return "\n".join(out)


# -- main ------------------------------------------------------------------------------------

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mirrors", type=Path, help="folder of the repositories' git dirs (see --help text above)")
    ap.add_argument("--repo-path", action="append", default=[], metavar="OWNER/NAME=PATH",
                    help="the git dir (or clone) of one repository (repeatable; wins over --mirrors)")
    ap.add_argument("--sets", type=Path, default=SETS, help="folder of the question sets (default: %(default)s)")
    ap.add_argument("--work", type=Path, help="folder for the work clones (default: a temporary one)")
    ap.add_argument("--home", type=Path, help="GITRAG_HOME for the run (default: a private temporary one)")
    ap.add_argument("--embedder", help="GITRAG_EMBEDDER for the run: static (default) or local (MiniLM)")
    ap.add_argument("--lang", action="append", default=[], help="only issues of this language (repeatable)")
    ap.add_argument("--repo", action="append", default=[], help="only issues of this owner/name (repeatable)")
    ap.add_argument("--skip-repo", action="append", default=[], help="leave out this owner/name (repeatable)")
    ap.add_argument("--limit", type=int, default=0, help="at most N issues in all")
    ap.add_argument("--per-repo", type=int, default=0, help="at most N issues per repository (the oldest)")
    ap.add_argument("--results", type=Path, help="write one JSON line per issue here")
    ap.add_argument("--json", action="store_true", help="print the summary as JSON instead of a table")
    ap.add_argument("--record", type=Path, metavar="FILE", help="also write the figures as a results file (bench/results/README.md)")
    ap.add_argument("--diagnose", type=Path, metavar="RESULTS",
                    help="only read a --results file and print what kinds of files win wrongly (JSON)")
    ap.add_argument("--misses", type=Path, nargs="+", metavar="RESULTS",
                    help="only read --results files and list each issue whose first file is wrong: the gold's rank, "
                         "the top 3 files, their kinds and the chunks that put them there (markdown)")
    ap.add_argument("--method", default="gitrag", help="the method --misses lists (gitrag, bm25, gitrag-STAGE)")
    ap.add_argument("--summarize", type=Path, nargs="+", metavar="RESULTS",
                    help="only read --results files (e.g. of an interrupted run) and print their table")
    ap.add_argument("--ablate", action="append", default=[], metavar="STAGE",
                    help="also run gitrag with this ranking stage switched off, as method gitrag-STAGE (repeatable; "
                         "STAGE,STAGE switches several off together)")
    ap.add_argument("--keep", type=Path, metavar="DIR",
                    help="keep the indexes in DIR (DIR/work, DIR/home) and index each base commit as its own branch "
                         "(loc-ID; gitrag holds branches as membership of one collection), so a re-run after a "
                         "ranking change syncs nothing and only asks; BM25's answers are kept in DIR/bm25.jsonl; "
                         "implies --full-history (what a sync reads of the history otherwise depends on its time)")
    ap.add_argument("--asks-only", action="store_true",
                    help="with --keep: only ask the issues whose branch is indexed there already (skip the others), with the "
                         "index and history as kept: no sync, no history read")
    ap.add_argument("--full-history", action="store_true",
                    help="read each base commit's whole commit history after its sync (a sync alone reads what its "
                         "time budget allows; later syncs read the rest)")
    args = ap.parse_args()
    if args.diagnose:
        rows = [json.loads(x) for x in args.diagnose.read_text(encoding="utf-8").splitlines() if x.strip()]
        print(json.dumps(diagnose(rows), indent=1))
        return 0
    if args.misses:
        rows = [json.loads(x) for f in args.misses for x in f.read_text(encoding="utf-8").splitlines() if x.strip()]
        print(misses(rows, args.method))
        return 0
    if args.summarize:
        rows = [json.loads(x) for f in args.summarize for x in f.read_text(encoding="utf-8").splitlines() if x.strip()]
        _record(args.record, report(rows, "(from results files)", {}, 0.0, 0.0, args.json))
        return 0

    tmp = Path(tempfile.mkdtemp(prefix="gitrag-localize-"))
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        args.home = args.home or args.keep / "home"
        args.work = args.work or args.keep / "work"
    bm25_kept = _read_kept(args.keep / "bm25.jsonl") if args.keep else {}
    home = args.home or tmp / "home"
    home.mkdir(parents=True, exist_ok=True)
    os.environ["GITRAG_HOME"] = str(home)
    os.environ["XDG_CONFIG_HOME"] = str(home / "config")  # no user config file changes the run
    if args.embedder:
        os.environ["GITRAG_EMBEDDER"] = args.embedder
    work = args.work or tmp / "work"

    from gitrag import logs
    from gitrag.index.indexer import Indexer
    from gitrag.index.workspace import open_workspace
    from gitrag.query.retrieval import ask
    from gitrag.surfaces import output

    logs.configure("warning")  # the script's own progress lines, not one per sync
    paths = {}
    for spec in args.repo_path:
        name, _, p = spec.partition("=")
        paths[name.lower()] = Path(p)
    rows = load_sets(args.sets, args.lang, args.repo)
    if args.skip_repo:
        skip = {x.lower() for x in args.skip_repo}
        rows = [r for r in rows if r["repo"].lower() not in skip]
    if args.per_repo:
        seen: Counter = Counter()
        kept = []
        for r in rows:
            if seen[r["repo"].lower()] < args.per_repo:
                kept.append(r)
                seen[r["repo"].lower()] += 1
        rows = kept
    if args.limit:
        rows = rows[: args.limit]
    by_repo: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_repo[r["repo"]].append(r)
    # cheapest repositories first (files at the first base commit plus files changed between
    # successive ones), so an interrupted run has scored the most issues
    cost = {repo: _index_cost(find_gitdir(args.mirrors, repo, paths), issues) for repo, issues in by_repo.items()}
    by_repo = dict(sorted(by_repo.items(), key=lambda kv: (cost[kv[0]], kv[0].lower())))
    results: list[dict] = []
    skipped: dict[str, str] = {}
    out_fh = open(args.results, "w", encoding="utf-8") if args.results else None  # noqa: SIM115 - written row by row, closed after the loop
    embedder = ""
    started = time.perf_counter()
    index_s = 0.0
    for repo, issues in by_repo.items():
        gitdir = find_gitdir(args.mirrors, repo, paths)
        if gitdir is None:
            skipped[repo] = "no git dir under --mirrors"
            log(f"{repo}: skipped (no git dir under --mirrors; clone it there, see the README)")
            continue
        dest = work / repo.replace("/", "+")
        work_clone(gitdir, dest)
        ws = None
        bm25 = BM25()
        try:
            for n, issue in enumerate(issues, 1):
                try:  # HEAD moves, the work tree stays empty: gitrag indexes commits, not files on disk
                    if args.keep:  # one branch per base commit, indexed once
                        ref = f"refs/heads/loc-{issue['id']}"
                        git(dest, "update-ref", ref, issue["base_commit"] + "^{commit}")
                        git(dest, "symbolic-ref", "HEAD", ref)
                    else:
                        git(dest, "update-ref", "--no-deref", "HEAD", issue["base_commit"] + "^{commit}")
                except RuntimeError as exc:
                    log(f"{issue['id']}: skipped ({exc})")
                    continue
                if ws is None:
                    ws = open_workspace(str(dest))
                    embedder = ws.embedder.fingerprint
                t0 = time.perf_counter()
                if args.asks_only:
                    kept_branch = ws.state.branch(ws.repo.branch())
                    if kept_branch is None or kept_branch.indexed_commit != issue["base_commit"]:
                        log(f"{issue['id']}: skipped (--asks-only: not indexed under --keep yet)")
                        skipped[issue["id"]] = "not indexed under --keep (--asks-only)"
                        continue
                if not args.asks_only:  # --asks-only: the kept index and history as they are, nothing read
                    try:
                        with output.progress_bar(False) as progress:
                            Indexer(ws, progress).sync()
                    except Exception as exc:  # noqa: BLE001 - e.g. rename detection over a blob the clone lacks
                        log(f"{issue['id']}: incremental sync failed ({type(exc).__name__}: {exc}); indexing afresh")
                        data_dir = Path(ws.data_dir)
                        ws.close()
                        shutil.rmtree(data_dir, ignore_errors=True)
                        ws = open_workspace(str(dest))
                        try:
                            with output.progress_bar(False) as progress:
                                Indexer(ws, progress).sync()
                        except Exception as exc2:  # noqa: BLE001 - one repository that does not sync is skipped, the rest go on
                            log(f"{issue['id']}: skipped (sync failed: {type(exc2).__name__}: {exc2})")
                            continue
                    if args.full_history or args.keep:  # --keep: each branch's whole history, as a plain run's
                        from gitrag.index import history  # would read it only over several syncs (time budget)

                        history.sync_branch(ws, ws.repo.branch(), ws.repo.require_head(), None)
                kept = bm25_kept.get((issue["id"], issue["base_commit"]))
                if kept is None:
                    bm25.index(ws)
                took = time.perf_counter() - t0
                index_s += took
                q = issue["question"]
                resp = ask(ws, q, k=10, files=True)
                g_files = [f.path for f in (resp.files or [])][:10]
                g_chunks = [(r.path, r.start_line, r.end_line) for r in resp.results]
                if kept is None:
                    b_hits = [(s, {k: d.get(k) for k in ("path", "start_line", "end_line", "symbol", "kind")})
                              for s, d in bm25.search(q, 200)]
                    if args.keep:
                        with open(args.keep / "bm25.jsonl", "a", encoding="utf-8") as fh:
                            fh.write(json.dumps({"id": issue["id"], "base_commit": issue["base_commit"],
                                                 "hits": b_hits}) + "\n")
                else:
                    b_hits = [(s, d) for s, d in kept]
                b_files = files_of([(s, d["path"]) for s, d in b_hits], 10)
                b_chunks = [(d["path"], d["start_line"], d["end_line"]) for _, d in b_hits]
                ablated = {}
                for stage in args.ablate:
                    r2 = ask(ws, q, k=10, files=True, disable=tuple(stage.split(",")))
                    ablated[f"gitrag-{stage}"] = score(issue["files"], issue["functions"],
                                                       [f.path for f in (r2.files or [])][:10],
                                                       [(r.path, r.start_line, r.end_line) for r in r2.results])
                row = {
                    **ablated,
                    "id": issue["id"], "repo": repo, "language": issue["language"],
                    "gold_files": issue["files"], "gold_functions": len(issue["functions"]),
                    "gitrag": score(issue["files"], issue["functions"], g_files, g_chunks),
                    "bm25": score(issue["files"], issue["functions"], b_files, b_chunks),
                    "gitrag_files": g_files, "bm25_files": b_files,
                    "gitrag_chunks": [f"{r.path}:{r.start_line}-{r.end_line} {r.symbol} ({r.kind})"
                                      for r in resp.results[:FUNC_K]],
                    "bm25_chunks": [f"{d['path']}:{d['start_line']}-{d['end_line']} {d.get('symbol', '')} "
                                    f"({d.get('kind', '')})" for _, d in b_hits[:FUNC_K]],
                    "index_s": round(took, 2),
                }
                results.append(row)
                if out_fh:
                    out_fh.write(json.dumps(row) + "\n")
                    out_fh.flush()
                log(f"{repo} {n}/{len(issues)} {issue['id']}: gitrag first gold at "
                    f"{row['gitrag']['first_rank']}, bm25 at {row['bm25']['first_rank']} (sync+bm25 {took:.1f} s)")
        finally:
            if ws is not None:
                ws.close()
    if out_fh:
        out_fh.close()
    methods = ["gitrag", *(f"gitrag-{s}" for s in args.ablate), "bm25"]
    _record(args.record, report(results, embedder, skipped, time.perf_counter() - started, index_s, args.json, methods))
    return 0


def _read_kept(path: Path) -> dict[tuple[str, str], list]:
    """BM25's kept answers by (issue id, base commit), from a --keep folder's bm25.jsonl."""
    if not path.exists():
        return {}
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            out[(row["id"], row["base_commit"])] = row["hits"]
    return out


def report(results: list[dict], embedder: str, skipped: dict[str, str], seconds: float, index_s: float,
           as_json: bool, methods: list[str] | None = None) -> dict:
    """Print the per-language table (or JSON) of ``results`` (one row per issue) for ``methods``
    (default: the methods the rows hold)."""
    if methods is None:
        methods = sorted({m for r in results for m, v in r.items() if isinstance(v, dict) and "first_rank" in v},
                         key=lambda m: (m == "bm25", m))
    by_lang: dict[str, list[dict]] = defaultdict(list)
    for r in results:
        by_lang[r["language"]].append(r)
    summary = {
        "embedder": embedder, "issues": len(results), "repositories": len({r["repo"] for r in results}),
        "skipped": skipped, "seconds": round(seconds, 1), "index_seconds": round(index_s, 1),
        "by_language": {lang: {m: summarize(rs, m) for m in methods} for lang, rs in sorted(by_lang.items())},
        "overall": {m: summarize(results, m) for m in methods},
    }
    if as_json:
        print(json.dumps(summary, indent=1))
        return summary
    print(f"embedder {embedder}; {len(results)} issues in {summary['repositories']} repositories; "
          f"file Acc@k and function recall@{FUNC_K} in %")
    print("| language | n | method | Acc@1 | Acc@3 | Acc@5 | Acc@10 | func R@5 |")
    print("|---|---|---|---|---|---|---|---|")
    items = list(summary["by_language"].items()) + [("overall", summary["overall"])]
    for lang, methods in items:
        for method, m in methods.items():
            cells = " | ".join(f"{m[k]:.1f}" for k in [f"acc@{k}" for k in KS] + [f"func_recall@{FUNC_K}"])
            print(f"| {lang} | {m['n']} | {method} | {cells} |")
    for repo, why in skipped.items():
        print(f"skipped {repo}: {why}")
    return summary


def _record(path: Path | None, summary: dict) -> None:
    """Write ``summary`` (report's) as a results file at ``path`` (bench/results/README.md), if given."""
    if path:
        import record  # bench/record.py, beside this script
        rows = {f"{lang} {m}": v for lang, ms in [*summary["by_language"].items(), ("overall", summary["overall"])]
                for m, v in ms.items()}
        record.write(path, title="Localization on real issues", issue=20, subject="localization",
                     tables=[record.by_row(f"file Acc@k and function recall in %, embedder {summary['embedder']}",
                                           rows, "language, method", digits=1)])


if __name__ == "__main__":
    raise SystemExit(main())
