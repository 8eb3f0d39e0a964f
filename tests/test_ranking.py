"""Ranking: question analysis, each stage on its own, and the pipeline through real indexes
(both store backends) for determinism, capitalised symbols and pasted tracebacks."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitrag.errors import EXIT_USAGE
from gitrag.index import sparse
from gitrag.index.store import Hit
from gitrag.index.workspace import open_workspace
from gitrag.query.ranking import STAGES, Candidate, DefinitionSite, analyse, rank, written_paths
from gitrag.query.ranking import stages as st
from gitrag.query.ranking.query import capitalised_words, is_symbol_query
from gitrag.query.retrieval import candidates, search
from gitrag.surfaces.cli import cli
from tests.gitutil import Repo, index

PREAMBLE = ("We deploy the shop service with docker compose on staging; after upgrading the base image the "
            "deploy script restarts the workers, the workers restart the queue and the staging deploy fails. ") * 3
TRACEBACK = PREAMBLE + '''Upgrading broke our CLI at import:

Traceback (most recent call last):
  File "/home/dev/app.py", line 8, in <module>
    main()
  File "/home/dev/.venv/lib/python3.12/site-packages/shop/cart.py", line 12, in add
    validate(qty)
  File "/home/dev/.venv/lib/python3.12/site-packages/shop/rules.py", line 3, in validate
    raise Invalid(qty)
shop.rules.Invalid: 0
'''


# -- question analysis --------------------------------------------------------------------------


@pytest.mark.parametrize(("question", "symbol"), [
    ("HTTPAdapter", True), ("Flask", True), ("render_template", True), ("Sinatra::Base", True), ("_private", True),
    ("session", False), ("how are routes registered", False),
])
def test_symbol_like_questions(question: str, symbol: bool) -> None:
    assert is_symbol_query(question) is symbol


def test_capitalised_words_skip_sentence_starts() -> None:
    assert capitalised_words("How does Flask pick an error handler? Which Blueprint wins?") == ["Flask", "Blueprint"]
    assert capitalised_words("Depends") == ["Depends"] and capitalised_words("session") == ["session"]


def test_long_question_reads_frames_paths_and_exceptions() -> None:
    q = analyse(TRACEBACK)
    assert q.long and [f.function for f in q.frames] == ["<module>", "add", "validate"]
    assert "validate" not in q.identifiers and "validate" in q.dense_text  # frames are matched as frames
    assert q.exceptions[0] == "Invalid" and "shop.rules.Invalid" in q.identifiers and any(p.endswith("shop/rules.py") for p in q.paths)
    assert "Invalid: 0" in q.dense_text.splitlines()[1]  # the exception line, not only the opening words
    assert q.term_weights and q.term_weights["validate"] > q.term_weights["upgrading"]
    short = analyse(TRACEBACK, long_questions=False)
    assert not short.long and short.dense_text == TRACEBACK and short.term_weights is None


# -- stages -------------------------------------------------------------------------------------


def cand(key: str, path: str, dense: float | None = None, sparse: float | None = None, line: int = 1) -> Candidate:
    return Candidate(key, path, line, line + 5, key, dense=dense, sparse=sparse)


class Lookup:
    def __init__(self, defs: dict[str, list[DefinitionSite]] | None = None, chunks: list[Candidate] = ()) -> None:
        self.defs, self.chunks = defs or {}, list(chunks)

    def definitions(self, name: str, exact_case: bool) -> list[DefinitionSite]:
        return self.defs.get(name, [])

    def chunks_at(self, site: DefinitionSite) -> list[Candidate]:
        return [c for c in self.chunks if c.path == site.path and c.start_line <= site.line <= c.end_line]

    def known_paths(self, written: str) -> list[str]:
        return written_paths(written, frozenset(c.path for c in self.chunks))

    def project_names(self) -> frozenset[str]:
        return frozenset({"shop"})


def test_fusion_weights_dense_less_for_a_symbol_question() -> None:
    def scores(question: str, off: tuple[str, ...] = ()) -> dict[str, float]:
        cands = [cand("d", "a.py", dense=0.9, sparse=1.0), cand("s", "b.py", dense=0.1, sparse=9.0),
                 cand("x", "c.py", dense=0.8)]
        return {c.key: round(c.score, 3) for c in rank(analyse(question), cands, 3, Lookup(), off)}
    nl = scores("where is quantity checked", ("coherence", "saturation", "path-match"))
    assert nl == {"s": 0.5, "x": 0.438, "d": 0.5}  # min-max per list, weight 0.5 each
    sym = scores("QuantityError", ("coherence", "saturation", "definitions"))
    assert sym["s"] == 0.7 and sym["d"] == 0.3
    assert scores("QuantityError", ("coherence", "saturation", "definitions", "query-weights"))["s"] == 0.5


def test_a_candidate_beyond_one_lists_top_keeps_its_real_score_there() -> None:
    # "t" is second by cosine but third by BM25: with the top 2 of each list as candidates it
    # must keep its sparse score (read deeper), not 0, and so beat chunks only one list likes.
    def hits(scores: dict[str, float]) -> list[Hit]:
        return [Hit(key, score, {"path": f"{key}.py", "start_line": 1, "end_line": 5}) for key, score in scores.items()]
    dense = hits({"x": 0.9, "t": 0.85, "d": 0.5, "z": 0.3})
    sparse = hits({"z": 10.0, "d": 9.0, "t": 8.0, "x": 1.0})
    cands = {c.key: c for c in candidates(dense, sparse, top=2)}
    assert set(cands) == {"x", "t", "z", "d"}
    assert (cands["t"].dense, cands["t"].sparse, cands["d"].dense) == (0.85, 8.0, 0.5)
    ranked = rank(analyse("where is quantity checked"), list(cands.values()), 4, Lookup(),
                  ("coherence", "saturation", "path-match", "path-priors"))
    assert [c.key for c in ranked][0] == "t"
    assert candidates(dense, hits({}), top=2)[0].sparse is None  # no sparse list: None, 0 once fused


def test_a_definition_always_wins_and_more_in_a_file_named_after_it() -> None:
    chunks = [cand("def", "shop/errors.py", line=10), cand("def2", "shop/quantity_error.py", line=1)]
    lookup = Lookup({"QuantityError": [DefinitionSite("QuantityError", "shop/errors.py", 12),
                                       DefinitionSite("QuantityError", "shop/quantity_error.py", 2)]}, chunks)
    cands = [cand("use", "shop/cart.py", dense=0.9, sparse=5.0), cand("other", "shop/x.py", dense=0.5, sparse=1.0)]
    out = rank(analyse("QuantityError"), cands, 4, lookup)
    assert [c.key for c in out][:3] == ["def2", "def", "use"]
    assert out[0].score == pytest.approx(1.5 * out[1].score)
    assert [c.key for c in rank(analyse("QuantityError"), cands, 4, lookup, ("definitions",))][0] == "use"


def test_the_project_named_in_a_sentence_is_not_its_class() -> None:
    class Project(Lookup):
        def project_names(self) -> frozenset[str]:
            return frozenset({"fastapi"})

    lookup = Project({"FastAPI": [DefinitionSite("FastAPI", "fastapi/applications.py", 40)]},
                     [cand("app", "fastapi/applications.py", line=38)])
    cands = [cand("run", "fastapi/concurrency.py", dense=0.9, sparse=0.9), cand("z", "z.py", dense=0.0, sparse=0.0)]
    off = ("coherence", "path-match")
    assert rank(analyse("how does FastAPI run sync functions"), cands, 3, lookup, off)[0].key == "run"
    assert rank(analyse("how does `FastAPI` run sync functions"), cands, 3, lookup, off)[0].key == "app"
    assert rank(analyse("FastAPI"), cands, 3, lookup, off)[0].key == "app"


def test_the_last_definition_of_a_name_in_a_file_wins_over_overload_stubs() -> None:
    chunks = [cand("stub", "shop/ctx.py", line=1), cand("impl", "shop/ctx.py", line=10)]
    lookup = Lookup({"current": [DefinitionSite("current", "shop/ctx.py", 2), DefinitionSite("current", "shop/ctx.py", 11)]},
                    chunks)
    cands = [cand("use", "shop/cart.py", dense=0.9, sparse=5.0), cand("z", "z.py", dense=0.0, sparse=0.0)]
    keys = [c.key for c in rank(analyse("where is `current` implemented"), cands, 4, lookup, ("saturation",))]
    assert keys[0] == "impl" and keys.index("stub") > keys.index("use")  # the stub gains half


def test_saturation_lets_another_file_in() -> None:
    cands = [cand(f"a{i}", "a.py", dense=1.0 - i / 100, sparse=1.0 - i / 100, line=10 * i) for i in range(3)]
    cands += [cand("b", "b.py", dense=0.9, sparse=0.9), cand("z", "z.py", dense=0.0, sparse=0.0)]
    off = ("coherence", "path-match")
    assert [c.path for c in rank(analyse("x y"), cands, 3, Lookup(), off)] == ["a.py", "b.py", "a.py"]
    assert [c.path for c in rank(analyse("x y"), cands, 3, Lookup(), (*off, "saturation"))] == ["a.py"] * 3


def test_path_priors_demote_tests_and_docs_unless_asked() -> None:
    cands = [cand("t", "tests/test_cart.py", dense=1.0, sparse=1.0), cand("i", "shop/cart.py", dense=0.8, sparse=0.8),
             cand("d", "docs/cart.rst", dense=0.9, sparse=0.9), cand("z", "z.py", dense=0.0, sparse=0.0)]
    off = ("coherence", "path-match")
    assert [c.key for c in rank(analyse("how is a cart total computed"), cands, 3, Lookup(), off)][0] == "i"
    assert [c.key for c in rank(analyse("which tests cover the cart total"), cands, 3, Lookup(), off)][0] == "t"
    assert [c.key for c in rank(analyse("where do the docs explain the cart"), cands, 3, Lookup(), off)][0] == "d"
    assert st.path_prior("src/pkg/__init__.py", frozenset()) == st.INIT_PRIOR


def test_a_tool_s_configuration_yields_to_the_code_that_reads_it_unless_a_configuration_is_asked_for() -> None:
    """pylintrc names every option, so an issue about an option matches it; the code reading
    the option is the answer, unless the question asks about a configuration (click's tox.ini)."""
    cands = [cand("c", "pylintrc", dense=1.0, sparse=1.0), cand("i", "pylint/lint/expand_modules.py", dense=0.8, sparse=0.8),
             cand("z", "z.py", dense=0.0, sparse=0.0)]
    off = ("coherence", "path-match")
    assert [c.key for c in rank(analyse("--recursive=y ignores ignore-paths"), cands, 2, Lookup(), off)][0] == "i"
    assert [c.key for c in rank(analyse("which paths does the lint configuration ignore"), cands, 2, Lookup(), off)][0] == "c"
    for path in ("Doxyfile", "Doxyfile.in", "mkdocs.yml", "tox.ini", "pylintrc", "eslintrc"):
        assert st.path_prior(path, frozenset()) == st.DOCS_PRIOR
        assert st.path_prior(path, st.asked_for("what does the typing environment in the tox configuration run")) == 1.0
    assert st.path_prior("src/click/parser.py", frozenset()) == 1.0


def test_a_chunk_that_is_mostly_docstring_yields_to_the_code_unless_docs_are_asked_for() -> None:
    wrapper = replace(cand("w", "shop/api.py", dense=1.0, sparse=1.0), payload={"prose": 0.9})
    impl = cand("i", "shop/_impl.py", dense=0.8, sparse=0.8)
    cands = [wrapper, impl, cand("z", "z.py", dense=0.0, sparse=0.0)]
    off = ("coherence", "path-match")
    assert [c.key for c in rank(analyse("how is a cart total computed"), cands, 2, Lookup(), off)] == ["i", "w"]
    assert [c.key for c in rank(analyse("how is a cart total computed"), cands, 2, Lookup(), (*off, "prose"))][0] == "w"
    assert [c.key for c in rank(analyse("where do the docs explain the cart total"), cands, 2, Lookup(), off)][0] == "w"
    one = {"w": replace(wrapper)}
    st.apply_prose_prior(one, analyse("how is a cart total computed"))
    assert one["w"].score == pytest.approx(wrapper.score * (1 - (1 - st.PROSE_PRIOR) * 0.9))


TEST_TRACE = '''test output:

Traceback (most recent call last):
  File "/home/dev/proj/tests/test_cart.py", line 5, in test_add_item_rejects_zero_quantity
    add([], "x", 0)
  File "/home/dev/.venv/lib/python3.12/site-packages/shop/cart.py", line 12, in add
    validate(qty)
ValueError: quantity must be positive; see the tests

FAILED tests/test_cart.py::test_add_item_rejects_zero_quantity - ValueError
'''


@pytest.mark.parametrize(("question", "asks"), [
    ("which tests cover the cart total", {"tests"}),
    ("Why won't the cart accept a zero quantity?", {"docs"}),
    ("In tests, `runner.invoke(cli)` returns exit code 1 but I cannot see why: the error is swallowed.", set()),
    ("During testing, the cart total is off by one.", set()),
    (TEST_TRACE, set()),  # a frame, a result line and the exception's message in a test: evidence, not the ask
    ("The cart total is wrong. Where is it tested?", {"tests"}),
    ("Which tests cover the cart total:", {"tests"}),  # one line: a question, not a label over a paste
    ("Adding a zero quantity passes. `pytest tests/test_cart.py` shows it. Please add a test for it.", {"tests"}),
])
def test_what_a_question_asks_for_is_read_from_its_own_words(question: str, asks: set[str]) -> None:
    assert st.asked_for(analyse(question).intent) == asks


def test_a_pasted_test_failure_still_demotes_tests() -> None:
    cands = [cand("t", "tests/test_cart.py", dense=1.0, sparse=1.0), cand("i", "shop/cart.py", dense=0.7, sparse=0.7),
             cand("z", "z.py", dense=0.0, sparse=0.0)]
    off = ("coherence", "path-match", "definitions")
    for question in (TEST_TRACE, "In tests, adding an item with quantity 0 gives a confusing error about the cart."):
        assert [c.key for c in rank(analyse(question), cands, 3, Lookup(), off)][0] == "i"
    assert [c.key for c in rank(analyse("which tests add an item"), cands, 3, Lookup(), off)][0] == "t"


def test_path_match_raises_a_file_named_by_the_question() -> None:
    cands = [cand("r", "shop/routing.py", dense=0.5, sparse=0.5), cand("o", "shop/other.py", dense=0.6, sparse=0.6),
             cand("z", "z.py", dense=0.0, sparse=0.0)]
    assert rank(analyse("how is routing done"), cands, 2, Lookup(), ("coherence",))[0].key == "r"
    assert rank(analyse("how is routing done"), cands, 2, Lookup(), ("coherence", "path-match"))[0].key == "o"


@pytest.mark.parametrize(("question", "path"), [
    ("how is a dependency resolved", "shop/dependencies/utils.py"),  # dependency / dependencies: one stem
    ("how are routes registered", "shop/routing.py"),  # routes / routing
])
def test_path_match_meets_a_file_by_the_words_stem(question: str, path: str) -> None:
    cands = [cand("r", path, dense=0.5, sparse=0.5), cand("o", "shop/other.py", dense=0.6, sparse=0.6),
             cand("z", "z.py", dense=0.0, sparse=0.0)]
    assert rank(analyse(question), cands, 2, Lookup(), ("coherence",))[0].key == "r"


def test_path_match_stems_a_question_word_as_the_sparse_terms_do() -> None:
    # "going" stems to "go", two letters: the sparse terms keep the word whole, and so does the
    # path match (a folder or file named "go" is not what "going" asks for)
    assert sparse.stem("going") == "going" and sparse.stem("dependencies") == "depend"
    cands = [cand("g", "tools/go/build.py", dense=0.5, sparse=0.5), cand("o", "shop/other.py", dense=0.6, sparse=0.6),
             cand("z", "z.py", dense=0.0, sparse=0.0)]
    assert rank(analyse("what is going wrong with the cart"), cands, 2, Lookup(), ("coherence",))[0].key == "o"


def test_equal_scores_are_ordered_by_path_then_line() -> None:
    cands = [cand(k, p, dense=0.5, sparse=0.5, line=n) for k, p, n in (("z", "b.py", 1), ("y", "a.py", 9), ("x", "a.py", 2))]
    for order in (cands, cands[::-1]):
        got = rank(analyse("x y"), [Candidate(**vars(c)) for c in order], 3, Lookup(), ("saturation", "coherence"))
        assert [(c.path, c.start_line) for c in got] == [("a.py", 2), ("a.py", 9), ("b.py", 1)]


def test_a_written_path_meets_the_indexed_file_by_its_trailing_folders() -> None:
    paths = frozenset({"src/click/core.py", "src/click/types.py", "docs/core.py", "examples/app.py"})
    installed = "/home/u/.venv/lib/python3.12/site-packages/click/core.py"
    assert written_paths(installed, paths) == ["src/click/core.py"]  # installed package, src/ layout
    assert written_paths("C:\\venv\\Lib\\site-packages\\click\\types.py", paths) == ["src/click/types.py"]
    assert written_paths("/home/u/proj/app.py", paths) == []  # the user's own file, not examples/app.py
    assert written_paths("core.py", paths) == ["docs/core.py", "src/click/core.py"]  # a bare name: each file so named
    assert written_paths("./src/click/core.py", paths) == ["src/click/core.py"]
    assert written_paths("core.py", paths, limit=1) == []  # too many files of that name say nothing


def test_a_frame_boosts_the_piece_holding_its_line() -> None:
    # one definition cut into two pieces; the frame's line is in the second: that piece ran
    pieces = [cand("head", "pkg/core.py", line=10), cand("tail", "pkg/core.py", line=16),
              cand("other", "pkg/core.py", line=40)]
    pieces[0].end_line, pieces[1].end_line = 15, 30
    lookup = Lookup({"parse": [DefinitionSite("parse", "pkg/core.py", 10, 30)]}, pieces)
    trace = ('Traceback (most recent call last):\n  File "/venv/site-packages/pkg/core.py", line 25, in parse\n'
             '    raise ValueError(x)\nValueError: bad\n')
    cands = [cand("noise", "pkg/noise.py", dense=1.0, sparse=1.0), cand("z", "z.py", dense=0.0, sparse=0.0)]
    assert rank(analyse(trace), cands, 3, lookup)[0].key == "tail"


def test_saturation_spares_the_chunks_the_question_names() -> None:
    # two frames ran in one file: the second is named by the trace as much as the first
    chunks = [cand("fail", "pkg/types.py", line=10), cand("convert", "pkg/types.py", line=40)]
    lookup = Lookup({"fail": [DefinitionSite("fail", "pkg/types.py", 10, 15)],
                     "convert": [DefinitionSite("convert", "pkg/types.py", 40, 45)]}, chunks)
    trace = ('Traceback (most recent call last):\n  File "/venv/site-packages/pkg/types.py", line 42, in convert\n'
             '    self.fail(x)\n  File "/venv/site-packages/pkg/types.py", line 12, in fail\n'
             '    raise BadValue(x)\npkg.types.BadValue: 3\n')
    cands = [cand("noise", "pkg/noise.py", dense=1.0, sparse=1.0), cand("z", "z.py", dense=0.0, sparse=0.0)]
    off = ("path-match", "coherence")
    assert [c.key for c in rank(analyse(trace), cands, 3, lookup, off)] == ["fail", "convert", "noise"]


def test_the_stage_texts_are_made_from_the_constants(monkeypatch: pytest.MonkeyPatch) -> None:
    from gitrag.query.ranking import pipeline

    assert pipeline.describe() == STAGES
    assert "dense weight 0.3 instead of 0.5" in STAGES["query-weights"]
    monkeypatch.setattr(st, "DENSE_WEIGHT_SYMBOL", 0.25)  # a constant changed: its text follows
    monkeypatch.setattr(st, "SATURATION_DECAY", 0.6)
    texts = pipeline.describe()
    assert "dense weight 0.25 instead of 0.5" in texts["query-weights"] and "0.6^n" in texts["saturation"]


def test_unknown_stage_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown ranking stage nope"):
        rank(analyse("x"), [cand("a", "a.py", dense=1.0)], 1, Lookup(), ("nope",))


# -- through real indexes -----------------------------------------------------------------------


HANDLER = "## Retry events\n\n" + " ".join(["A retry event for a session is handled once, then logged."] * 14) + "\n\n"


@pytest.fixture(params=["embedded", "server"])
def shop(request: pytest.FixtureRequest, repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Repo:
    """A repository indexed into the embedded Qdrant Edge store or qdrant-client's local mode;
    ``shop/handlers.md`` holds five identical sections (identical chunks: equal scores)."""
    if request.param == "server":
        monkeypatch.setenv("GITRAG_QDRANT_URL", f"path:{tmp_path / 'qdrant-local'}")
    repo.write("shop/handlers.md", "".join(HANDLER for _ in range(5)))
    repo.write("shop/sessions.py", "class Session:\n    \"\"\"A shopping session: the cart and the user.\"\"\"\n\n"
               "    def __init__(self, user):\n        self.user = user\n")
    for i in range(4):
        repo.write(f"shop/use{i}.py", f"from shop.sessions import Session\n\n\ndef open_{i}(user):\n"
                   f"    session = Session(user)  # a Session per user, Session reused\n    return session\n")
    repo.write("shop/cart.py", "from shop.rules import validate\n\n\ndef add(cart, item, qty):\n"
               "    validate(qty)\n    cart.append((item, qty))\n")
    repo.write("shop/rules.py", "class Invalid(ValueError):\n    pass\n\n\ndef validate(qty):\n"
               "    if qty <= 0:\n        raise Invalid(qty)\n")
    repo.write("shop/deploy.py", "def restart_workers(staging):\n    \"\"\"Deploy with docker compose: the deploy "
               "script restarts the workers and the queue on staging after upgrading the base image.\"\"\"\n"
               "    return staging.compose('restart', 'workers', 'queue')\n")
    repo.write("tests/test_cart.py", "from shop.cart import add_item\n\n\ndef test_add_item_rejects_zero_quantity():\n"
               "    add([], 'x', 0)  # Invalid validate add\n")
    repo.commit("shop")
    index(repo.path)
    return repo


def test_five_identical_asks_give_identical_results(shop: Repo) -> None:
    with open_workspace(shop.path) as ws:
        runs = [[(r.path, r.start_line, r.score) for r in search(ws, "how is a retry event handled", k=20)]
                for _ in range(5)]
    assert all(run == runs[0] for run in runs[1:])
    again = open_workspace(shop.path)
    try:  # without merging touching pieces, so the identical sections stay apart
        found = search(again, "how is a retry event handled", k=20, merge=False)
    finally:
        again.close()
    unmerged = [(r.path, r.start_line, r.score) for r in found]
    tied = [(line, score) for path, line, score in unmerged if path == "shop/handlers.md"]
    assert len(tied) >= 3  # identical chunks score alike: they are taken in line order
    assert [line for line, _ in tied] == sorted(line for line, _ in tied)


def test_a_capitalised_symbol_question_finds_its_definition_first(shop: Repo) -> None:
    with open_workspace(shop.path) as ws:
        top = search(ws, "Session", k=5)
        plain = search(ws, "Session", k=5, disable=("definitions",))
    assert (top[0].path, top[0].start_line) == ("shop/sessions.py", 1)
    assert top[0].score > 2 * top[1].score  # the definition wins by the boost, not by luck
    assert plain[0].score < top[0].score


def test_a_pasted_traceback_finds_the_raising_function(shop: Repo) -> None:
    with open_workspace(shop.path) as ws:
        top = search(ws, TRACEBACK, k=5)
        off = search(ws, TRACEBACK, k=5, disable=("long-query",))
    assert (top[0].path, top[0].symbol) == ("shop/rules.py", "validate")  # the innermost frame in the repository
    assert all(not r.path.startswith("tests/") for r in top[:3])
    assert off[0].symbol != "validate"  # read as a short question, the chat before the trace wins


def test_eval_ablate_runs_each_stage_beside_hybrid(shop: Repo, tmp_path: Path) -> None:
    qfile = tmp_path / "q.jsonl"
    qfile.write_text(json.dumps({"id": "q1", "kind": "identifier", "query": "Where is `validate` defined?",
                                 "targets": [{"path": "shop/rules.py", "start_line": 5, "end_line": 7}]}) + "\n")
    runner = CliRunner()
    res = runner.invoke(cli, ["eval", str(qfile), "--repo", str(shop.path), "--mode", "dense",
                              "--ablate", "definitions", "--ablate", "saturation", "--json"])
    assert res.exit_code == 0, res.output
    modes = json.loads(res.output)["modes"]
    assert list(modes) == ["hybrid", "hybrid-definitions", "hybrid-saturation", "dense"]
    assert modes["hybrid"]["overall"]["recall@1"] == 1.0
    bad = runner.invoke(cli, ["eval", str(qfile), "--repo", str(shop.path), "--ablate", "nope"])
    assert bad.exit_code == EXIT_USAGE and "'nope' is not one of" in bad.output
    assert set(STAGES) >= {"definitions", "saturation", "long-query"}


def test_a_traceback_from_an_installed_package_meets_its_src_layout(repo: Repo) -> None:
    # the trace prints site-packages/shop/..., the repository keeps the package in src/shop/
    repo.write("src/shop/cart.py", "from shop.rules import validate\n\n\ndef add(cart, item, qty):\n"
               "    validate(qty)\n    cart.append((item, qty))\n")
    repo.write("src/shop/rules.py", "class Invalid(ValueError):\n    pass\n\n\ndef validate(qty):\n"
               "    if qty <= 0:\n        raise Invalid(qty)\n")
    repo.write("src/shop/deploy.py", "def restart_workers(staging):\n    \"\"\"Deploy with docker compose: the deploy "
               "script restarts the workers and the queue on staging after upgrading the base image.\"\"\"\n"
               "    return staging.compose('restart', 'workers', 'queue')\n")
    repo.write("docs/errors.md", "# Errors\n\nAn `Invalid` error is raised when a cart is upgraded with a bad "
               "quantity; the CLI prints it at import.\n")
    repo.commit("src layout")
    index(repo.path)
    with open_workspace(repo.path) as ws:
        top = search(ws, TRACEBACK, k=5)
    assert [(r.path, r.symbol) for r in top[:2]] == [("src/shop/rules.py", "validate"), ("src/shop/cart.py", "add")]


def test_the_implementation_outranks_its_documented_wrapper(repo: Repo) -> None:
    repo.write("shop/api.py", "from shop._impl import sum_lines\n\n\ndef cart_total(cart):\n"
               '    """The cart total: each line\'s price times its quantity, summed over the cart,\n'
               "    with the cart's discount taken off the total and the total rounded to cents.\n"
               '    The total of an empty cart is zero."""\n    return sum_lines(cart)\n')
    repo.write("shop/_impl.py", "def sum_lines(cart):\n    total = 0\n    for price, quantity in cart.lines:\n"
               "        total += price * quantity\n    return round(total - cart.discount, 2)\n")
    repo.commit("cart total")
    index(repo.path)
    question = "how is the cart total summed from each price and quantity"
    with open_workspace(repo.path) as ws:
        top = search(ws, question, k=2, snippets=False)
        without = search(ws, question, k=2, snippets=False, disable=("prose",))
    assert [r.path for r in without] == ["shop/api.py", "shop/_impl.py"]  # the docstring repeats the question
    assert [r.path for r in top] == ["shop/_impl.py", "shop/api.py"]
