"""gitrag.query.evaluation: metrics on hand-computed cases, loaders on the real label files,
the grep baselines on a real git repository, the runner's contract JSON, the tables."""

from __future__ import annotations

import io
import json
import math
import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from gitrag.errors import EmptyRepository, GitragError, NotARepository
from gitrag.query.evaluation import datasets, metrics
from gitrag.query.evaluation.datasets import DatasetError, Question, Target, infer_category, load_dataset
from gitrag.query.evaluation.grep import GrepBaseline, grep_search, head_files, line_count, query_words, ripgrep_search
from gitrag.query.evaluation.metrics import Result, hits, path_matches, score_question, scores_from_ranks
from gitrag.query.evaluation.report import PUBLISHED_SCORES, print_report, published_table
from gitrag.query.evaluation.runner import mean_over_reports, percentile, run_dataset, run_eval

# the question sets ship inside the repository (bench/eval/, with their licenses)
EVAL = Path(__file__).resolve().parents[1] / "bench" / "eval"
CLICK = EVAL / "click-8.1.7.jsonl"
SEMBLE = EVAL / "semble"

L2, L3, L4, L5 = (1 / math.log2(n) for n in (2, 3, 4, 5))  # gains at ranks 1..4


def R(path: str, start: int = 1, end: int = 10) -> Result:
    return Result(path, start, end)


def T(path: str, start: int | None = None, end: int | None = None) -> Target:
    return Target(path, start, end)


MISS = R("other.py")


# --- metrics: hit rule ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("start", "end", "hit"),
    [(20, 30, True), (21, 30, False), (1, 10, True), (1, 9, False), (12, 15, True), (1, 99, True)],
)
def test_span_overlap_includes_touching_at_a_single_line(start: int, end: int, hit: bool) -> None:
    assert hits(R("a.py", start, end), T("a.py", 10, 20)) is hit


def test_file_level_target_is_hit_by_any_chunk_of_its_file() -> None:
    assert hits(R("a.py", 500, 600), T("a.py"))
    assert not hits(R("b.py", 1, 10), T("a.py"))


def test_file_level_mode_ignores_spans() -> None:
    assert not hits(R("a.py", 50, 60), T("a.py", 1, 10))
    assert hits(R("a.py", 50, 60), T("a.py", 1, 10), file_level=True)


@pytest.mark.parametrize(
    ("result", "target", "suffix", "exact"),
    [
        ("fastapi/routing.py", "fastapi/routing.py", True, True),
        ("/home/u/fastapi/fastapi/routing.py", "fastapi/routing.py", True, False),
        ("routing.py", "fastapi/routing.py", True, False),
        ("fastapi\\routing.py", "fastapi/routing.py", True, False),
        ("fastapi/xrouting.py", "fastapi/routing.py", False, False),
        ("fastapi/routing.py", "routing.py/x", False, False),
    ],
)
def test_path_rules(result: str, target: str, suffix: bool, exact: bool) -> None:
    assert path_matches(result, target, suffix_paths=True) is suffix
    assert path_matches(result, target) is exact


# --- metrics: hand-computed scores ----------------------------------------------------


def test_single_target_at_rank_1_scores_one_everywhere() -> None:
    assert score_question([R("a.py"), MISS], [T("a.py", 5, 6)]) == dict.fromkeys(metrics.METRICS, 1.0)


def test_single_target_at_rank_3() -> None:
    s = score_question([MISS, MISS, R("a.py"), MISS], [T("a.py", 5, 6)])
    assert s == {"recall@1": 0.0, "recall@5": 1.0, "recall@10": 1.0, "mrr@10": pytest.approx(1 / 3),
                 "ndcg@10": pytest.approx(0.5)}  # fmt: skip


def test_two_targets_at_ranks_2_and_4() -> None:
    s = score_question([MISS, R("a.py"), MISS, R("b.py"), MISS], [T("a.py"), T("b.py")])
    assert s["recall@1"] == 0.0 and s["recall@5"] == 1.0 and s["mrr@10"] == 0.5
    assert s["ndcg@10"] == pytest.approx((L3 + L5) / (L2 + L3))  # 1.06161 / 1.63093 = 0.65093
    assert s["ndcg@10"] == pytest.approx(0.650920, abs=1e-6)


def test_target_at_rank_6_counts_for_recall_at_10_only() -> None:
    s = score_question([MISS] * 5 + [R("a.py")], [T("a.py")])
    assert (s["recall@5"], s["recall@10"], s["mrr@10"]) == (0.0, 1.0, pytest.approx(1 / 6))


def test_duplicate_hits_of_one_target_gain_once() -> None:
    results = [R("a.py", 1, 5), R("a.py", 6, 10), MISS, R("b.py")]
    s = score_question(results, [T("a.py", 1, 10), T("b.py")])
    assert s["recall@1"] == 0.5 and s["mrr@10"] == 1.0
    assert s["ndcg@10"] == pytest.approx((L2 + L5) / (L2 + L3))  # 0.87722
    only_a = score_question(results, [T("a.py", 1, 10)])
    assert only_a["ndcg@10"] == 1.0


def test_two_targets_first_matched_by_one_chunk_gain_once() -> None:
    s = score_question([R("a.py", 1, 30)], [T("a.py", 1, 10), T("a.py", 20, 30)])
    assert s["recall@1"] == 1.0 and s["mrr@10"] == 1.0
    assert s["ndcg@10"] == pytest.approx(L2 / (L2 + L3))  # 0.61315


def test_no_target_hit_scores_zero() -> None:
    assert score_question([MISS] * 10, [T("a.py")]) == dict.fromkeys(metrics.METRICS, 0.0)
    assert score_question([], [T("a.py")]) == dict.fromkeys(metrics.METRICS, 0.0)


def test_target_hit_only_at_rank_11_is_a_miss() -> None:
    s = score_question([MISS] * 10 + [R("a.py")], [T("a.py")])
    assert s == dict.fromkeys(metrics.METRICS, 0.0)
    assert scores_from_ranks([11]) == dict.fromkeys(metrics.METRICS, 0.0)


def test_no_targets_scores_zero() -> None:
    assert score_question([R("a.py")], []) == dict.fromkeys(metrics.METRICS, 0.0)


def test_ideal_dcg_is_capped_at_ten_targets() -> None:
    targets = [T(f"f{i}.py") for i in range(12)]
    s = score_question([R(f"f{i}.py") for i in range(12)], targets)
    assert s["ndcg@10"] == pytest.approx(1.0) and s["recall@10"] == pytest.approx(10 / 12)
    assert s["recall@1"] == pytest.approx(1 / 12) and s["recall@5"] == pytest.approx(5 / 12)


def test_file_level_mode_dedupes_by_file_then_cuts_at_ten() -> None:
    results = [R("big.py", i, i) for i in range(1, 13)] + [R("a.py", 900, 950)]
    targets = [T("a.py", 1, 10)]
    assert score_question(results, targets)["recall@10"] == 0.0  # rank 13, and span misses
    s = score_question(results, targets, file_level=True)
    assert s["mrr@10"] == 0.5 and s["ndcg@10"] == pytest.approx(L3 / L2)


def test_suffix_rule_in_scoring() -> None:
    results = [R("/abs/repo/fastapi/params.py", 740, 760)]
    targets = [T("fastapi/params.py", 746, 749)]
    assert score_question(results, targets)["mrr@10"] == 0.0
    assert score_question(results, targets, suffix_paths=True)["mrr@10"] == 1.0


def _upstream_ndcg(ranks: list[int], n: int, k: int = 10) -> float:
    """semble benchmarks/metrics.py ndcg_at_k, restated independently."""
    if n == 0:
        return 0.0
    rel = [0] * k
    for r in ranks:
        if 1 <= r <= k:
            rel[r - 1] = 1
    ideal = sum(1 / math.log2(i + 2) for i in range(min(k, n)))
    return sum(g / math.log2(i + 2) for i, g in enumerate(rel)) / ideal


@given(st.lists(st.one_of(st.none(), st.integers(1, 15)), max_size=14))
def test_ndcg_equals_upstream_formula(ranks: list[int | None]) -> None:
    found = [r for r in ranks if r is not None]
    assert scores_from_ranks(ranks)["ndcg@10"] == pytest.approx(_upstream_ndcg(found, len(ranks)))


def test_aggregate_means_overall_and_per_kind() -> None:
    one, zero = dict.fromkeys(metrics.METRICS, 1.0), dict.fromkeys(metrics.METRICS, 0.0)
    overall, by_kind = metrics.aggregate([("b", one), ("a", zero), ("b", zero), ("b", one)])
    assert overall["ndcg@10"] == 0.5
    assert list(by_kind) == ["a", "b"]
    assert by_kind["a"]["mrr@10"] == 0.0 and by_kind["b"]["mrr@10"] == pytest.approx(2 / 3)
    assert metrics.mean_scores([]) == zero


# --- datasets ---------------------------------------------------------------------------


def test_click_question_set_loads() -> None:
    data = load_dataset(CLICK)
    kinds = [q.kind for q in data.questions]
    assert (data.name, data.format, len(data.questions)) == ("click-8.1.7", "click", 40)
    assert (kinds.count("concept"), kinds.count("identifier"), kinds.count("mixed")) == (15, 12, 13)
    first = data.questions[0]
    assert first.id == "click-001"
    assert first.targets == (Target("src/click/utils.py", 520, 572, "_detect_program_name"),)
    assert all(1 <= len(q.targets) <= 3 and all(t.has_span for t in q.targets) for q in data.questions)
    assert data.scope is None and not data.suffix_paths and data.headline == "recall@10"


@pytest.mark.parametrize(
    ("name", "n", "cats", "targets", "spans"),
    [("fastapi", 20, (7, 8, 5), 34, 5), ("flask", 21, (7, 11, 3), 34, 0), ("requests", 20, (7, 8, 5), 25, 5)],
)
def test_semble_label_files_load(
    name: str, n: int, cats: tuple[int, int, int], targets: int, spans: int
) -> None:
    data = load_dataset(SEMBLE / f"{name}.json")
    kinds = [q.kind for q in data.questions]
    assert (data.name, data.format, len(data.questions)) == (name, "semble", n)
    assert tuple(kinds.count(c) for c in ("architecture", "semantic", "symbol")) == cats
    assert sum(len(q.targets) for q in data.questions) == targets
    assert sum(t.has_span for q in data.questions for t in q.targets) == spans
    assert data.scope == datasets.SEMBLE_ROOTS[name] and data.suffix_paths and data.headline == "ndcg@10"
    assert data.questions[0].id == f"{name}-001"


def test_semble_targets_are_relevant_then_secondary() -> None:
    first = load_dataset(SEMBLE / "fastapi.json").questions[0]
    assert [t.path for t in first.targets] == [
        "fastapi/dependencies/utils.py", "fastapi/dependencies/models.py", "fastapi/params.py"]  # fmt: skip
    depends = next(q for q in load_dataset(SEMBLE / "fastapi.json").questions if q.query == "Depends")
    assert depends.targets[0] == Target("fastapi/params.py", 746, 749)


@pytest.mark.parametrize(
    ("query", "category"),
    [("Depends", "symbol"), ("  Session.send  ", "symbol"), ("how are routes registered", "architecture"),
     ("How does X work", "architecture"), ("howdy partner", "semantic"),
     ("file upload handling", "semantic")],
)  # fmt: skip
def test_infer_category(query: str, category: str) -> None:
    assert infer_category(query) == category


def test_semble_category_inferred_when_missing_and_repo_key(tmp_path: Path) -> None:
    items = [{"query": "Blueprint", "relevant": ["a.py"]},
             {"query": "how x", "relevant": [{"path": "b.py", "start_line": "3", "end_line": 4}],
              "category": "semantic"},
             {"query": "what is y", "relevant": [], "secondary": ["c.py"], "category": None}]  # fmt: skip
    path = tmp_path / "labels.json"
    path.write_text(json.dumps(items))
    data = load_dataset(path)
    assert [q.kind for q in data.questions] == ["symbol", "semantic", "semantic"]
    assert data.questions[1].targets == (Target("b.py", 3, 4),)
    assert data.name == "labels" and data.scope is None
    path.write_text(json.dumps([{**i, "repo": "flask"} for i in items]))
    assert load_dataset(path).scope == "src/flask/"


GOOD = {
    "id": "q1", "kind": "concept", "query": "q?",
    "targets": [{"path": "a.py", "start_line": 1, "end_line": 2}],
}


def _with(**changes: object) -> str:
    return json.dumps({**GOOD, "id": "q2", **changes})


def _target(**span: object) -> str:
    return _with(targets=[{"path": "a.py", **span}])


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "invalid JSON"),
        ("[1]", "expected a JSON object"),
        (_with(targets=[]), "'targets' must be a non-empty list"),
        (_with(query=""), "'query' must be a non-empty string"),
        (_with(id="q1"), "duplicate question id"),
        (_target(start_line=5, end_line=2), "start_line 5 is after end_line 2"),
        (_target(start_line=5), "or neither"),
        (_target(start_line=0, end_line=2), "positive integer"),
        (_with(targets=["a.py"]), "target 1: expected an object"),
    ],
)
def test_malformed_jsonl_names_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps(GOOD) + "\n\n" + line + "\n")
    with pytest.raises(DatasetError, match=re.escape(message)) as info:
        load_dataset(path)
    assert f"{path}:3:" in str(info.value)
    assert isinstance(info.value, GitragError)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[\n{,]", ":2: invalid JSON"),
        ("{}", "non-empty JSON array"),
        ('[{"query": "a b", "relevant": ["x"]}, {"relevant": ["x"]}]', "query 2: 'query'"),
        ('[{"query": "a b", "relevant": "x"}]', "query 1: 'relevant' must be a list"),
        ('[{"query": "a b", "relevant": [], "secondary": [3]}]', "query 1: secondary[0]: expected an object"),
        ('[{"query": "a", "repo": "x"}, {"query": "b", "repo": "y"}]', "several repos"),
    ],
)
def test_malformed_semble_file_names_file_and_query(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(DatasetError, match=re.escape(message)):
        load_dataset(path)


def test_missing_or_unknown_question_file(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="cannot read"):
        load_dataset(tmp_path / "nope.jsonl")
    with pytest.raises(DatasetError, match="use .jsonl or semble .json"):
        load_dataset(tmp_path / "q.csv")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(DatasetError, match="no questions"):
        load_dataset(tmp_path / "empty.jsonl")


# --- grep baselines -----------------------------------------------------------------------


def _git(repo: Path, *args: str) -> None:
    config = ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"]
    cmd = ["git", *config, *args]
    subprocess.run(cmd, cwd=repo, check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "config.py").write_text("def parse_config(path):\n    return load(path)\n")
    (root / "src" / "pkg" / "loader.py").write_text("CONFIG = 1\nconfig config config\nconfig\n")
    (root / "docs.md").write_text("How to parse a Config file.\nParse the config file.\nnothing here")
    (root / "logo.bin").write_bytes(b"config\0parse\0")
    (root / "link.py").symlink_to("src/pkg/config.py")
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "init")
    (root / "docs.md").write_text("uncommitted: parse config parse config\n")  # not in HEAD
    return root


def test_head_files_reads_committed_text_blobs_only(repo: Path) -> None:
    files = dict(head_files(repo))
    assert sorted(files) == ["docs.md", "src/pkg/config.py", "src/pkg/loader.py"]
    assert files["docs.md"].startswith("How to parse")
    assert sorted(dict(head_files(repo, "src/pkg/"))) == ["src/pkg/config.py", "src/pkg/loader.py"]


def test_head_files_errors(tmp_path: Path) -> None:
    with pytest.raises(NotARepository):
        list(head_files(tmp_path))
    _git(tmp_path, "init", "-q")
    with pytest.raises(EmptyRepository):
        list(head_files(tmp_path))


def test_query_words_drops_stop_words_short_words_and_duplicates() -> None:
    assert query_words("How do I parse the Config file, config_path or a.b?") == [
        "parse", "config", "file", "config_path"]  # fmt: skip


def test_grep_ranks_by_distinct_words_then_total_count(repo: Path) -> None:
    baseline = GrepBaseline.from_repo(repo)
    results = baseline.search("how to parse the config file")
    # docs.md has parse, config, file; config.py has parse, config; loader.py config only
    assert [r.path for r in results] == ["docs.md", "src/pkg/config.py", "src/pkg/loader.py"]
    assert [(r.start_line, r.end_line) for r in results] == [(1, 3), (1, 2), (1, 3)]
    assert baseline.search("config", k=2)[0].path == "src/pkg/loader.py"  # 5 matches beat 2
    assert len(baseline.search("config", k=2)) == 2
    assert baseline.search("zzz unknown") == [] and baseline.search("the a") == []


def test_ripgrep_counts_lines_with_the_whole_query(repo: Path) -> None:
    files = list(head_files(repo))
    results = ripgrep_search(files, "CONFIG")
    assert [(r.path, r.score) for r in results] == [
        ("src/pkg/loader.py", 3.0), ("docs.md", 2.0), ("src/pkg/config.py", 1.0)]  # fmt: skip
    assert [r.path for r in ripgrep_search(files, "config file")] == ["docs.md"]
    assert ripgrep_search(files, "parse config file") == []


def test_grep_over_plain_pairs_and_line_count() -> None:
    assert [r.path for r in grep_search([("a", "alpha"), ("b", "beta gamma")], "gamma beta")] == ["b"]
    assert (line_count(""), line_count("x"), line_count("x\n"), line_count("x\ny")) == (1, 1, 1, 2)


# --- runner ---------------------------------------------------------------------------------

QUESTIONS = [
    Question("q1", "concept", "alpha", (T("a.py", 10, 20),)),
    Question("q2", "identifier", "beta", (T("b.py", 1, 5), T("c.py"))),
    Question("q3", "concept", "gamma", (T("src/g.py"),)),
]
ANSWERS = {
    "alpha": [R("x.py"), R("a.py", 15, 30)],  # rank 2
    "beta": [R("c.py", 100, 120), R("b.py", 6, 9), R("b.py", 5, 5)],  # c at 1, b at 3
    "gamma": [R("out/g.py"), R("src/g.py")],  # rank 2, rank 1 with scope "src/"
}
KEYS = {"recall@1", "recall@5", "recall@10", "mrr@10", "ndcg@10"}


def fake_search(query: str) -> list[Result]:
    return ANSWERS[query]


def test_run_eval_produces_the_contract_json() -> None:
    report = run_eval(QUESTIONS, {"hybrid": fake_search, "dense": lambda q: []})
    out = json.loads(json.dumps(report.to_json()))
    assert out["questions"] == 3 and list(out["modes"]) == ["hybrid", "dense"]
    for mode in out["modes"].values():
        assert set(mode) >= {"overall", "by_kind", "latency_ms"} and "per_question" not in mode
        assert set(mode["overall"]) == KEYS
        assert set(mode["by_kind"]) == {"concept", "identifier"}
        assert all(set(s) == KEYS for s in mode["by_kind"].values())
        assert set(mode["latency_ms"]) == {"p50", "p95"}
        assert 0 <= mode["latency_ms"]["p50"] <= mode["latency_ms"]["p95"]
    hybrid = out["modes"]["hybrid"]
    assert hybrid["overall"]["mrr@10"] == pytest.approx((1 / 2 + 1 + 1 / 2) / 3)
    assert hybrid["by_kind"]["identifier"]["recall@1"] == 0.5
    assert hybrid["by_kind"]["identifier"]["ndcg@10"] == pytest.approx((L2 + L4) / (L2 + L3))
    assert out["modes"]["dense"]["overall"] == dict.fromkeys(KEYS, 0.0)


def test_run_eval_scope_k_and_per_question() -> None:
    report = run_eval(QUESTIONS, {"hybrid": fake_search}, k=1, scope="src/")
    runs = {r["id"]: r for r in report.to_json(per_question=True)["modes"]["hybrid"]["per_question"]}
    assert runs["q3"]["mrr@10"] == 1.0 and runs["q3"]["ranks"] == [1]
    assert runs["q1"]["ranks"] == [None]  # everything outside src/
    report = run_eval(QUESTIONS, {"hybrid": fake_search}, k=1)
    runs = {r.id: r for r in report.modes["hybrid"].runs}
    assert runs["q2"].ranks == [None, 1] and runs["q2"].scores["recall@10"] == 0.5


def test_grep_mode_is_scored_per_file() -> None:
    report = run_eval(QUESTIONS[:2], {"grep": fake_search, "sparse": fake_search})
    grep, sparse = report.modes["grep"], report.modes["sparse"]
    assert grep.file_level and not sparse.file_level
    assert [r.ranks for r in grep.runs] == [[2], [2, 1]]  # b.py dedup: rank 2, span ignored
    assert [r.ranks for r in sparse.runs] == [[2], [3, 1]]


def test_run_dataset_uses_semble_rules() -> None:
    data = load_dataset(SEMBLE / "requests.json")
    by_query = {q.query: q for q in data.questions}

    def oracle(query: str) -> list[Result]:
        return [R("docs/x.py")] + [R("/abs/" + t.path, t.start_line or 1, t.end_line or 1)
                                   for t in by_query[query].targets]  # fmt: skip

    report = run_dataset(data, {"oracle": oracle})
    out = report.to_json()
    assert (out["dataset"], out["format"], out["scope"], out["headline"]) == (
        "requests", "semble", "src/requests/", "ndcg@10")  # fmt: skip
    assert out["modes"]["oracle"]["overall"]["ndcg@10"] == 0.0  # "/abs/..." is out of scope
    report = run_dataset(data, {"oracle": oracle}, scope="/abs/")
    assert report.modes["oracle"].overall["ndcg@10"] == pytest.approx(1.0)
    assert mean_over_reports([report, report])["oracle"]["ndcg@10"] == pytest.approx(1.0)


def test_percentile_interpolates_linearly() -> None:
    assert (percentile([4, 1, 3, 2], 50), percentile([1, 2, 3, 4], 95)) == (2.5, pytest.approx(3.85))
    assert (percentile([], 50), percentile([7.0], 95)) == (0.0, 7.0)


# --- report -----------------------------------------------------------------------------------


def _render(report: object) -> str:
    buffer = io.StringIO()
    print_report(report, Console(file=buffer, width=200))
    return buffer.getvalue()


def test_report_prints_modes_side_by_side_per_kind() -> None:
    text = _render(run_eval(QUESTIONS, {"hybrid": fake_search, "grep": fake_search}))
    assert "hybrid" in text and "grep" in text and "kind concept" in text and "kind identifier" in text
    assert "nDCG@10" in text and "latency p95 ms" in text and "published" not in text


def test_semble_report_shows_published_scores() -> None:
    data = load_dataset(SEMBLE / "flask.json")
    report = run_dataset(data, {"hybrid": lambda q: [R("src/flask/app.py")]})
    text = _render(report)
    assert "gitrag hybrid" in text and "ripgrep, fixed strings" in text and "0.913" in text
    assert published_table([run_eval(QUESTIONS, {"hybrid": fake_search})]) is None


def test_published_scores_match_the_semble_readme() -> None:
    readme = (SEMBLE / "README.md").read_text()
    section = readme.split("## Published scores")[1].split("Notes on the table")[0]
    rows = [line for line in section.splitlines() if re.match(r"\| \S.*\| \d\.\d{3} \|$", line)]
    numbers = [tuple(float(x) for x in re.findall(r"\d\.\d{3}", row)) for row in rows]
    assert numbers == [(p.fastapi, p.flask, p.requests, p.overall) for p in PUBLISHED_SCORES]
