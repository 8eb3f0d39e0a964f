"""Exact names in a question (issue 20): how a written name picks its definitions (sigils,
receivers, module qualifiers) and the pin that keeps a named definition first, on a real
repository (real TypeScript, Python and PHP grammars) indexed with the test embedder."""

from __future__ import annotations

import pytest

from gitrag.index.workspace import open_workspace
from gitrag.query.ranking import Candidate, DefinitionSite, analyse, query_identifiers
from gitrag.query.ranking.query import is_symbol_query
from gitrag.query.ranking.stages import named_sites, pin_named, written_segments
from gitrag.query.retrieval import _Lookup, search
from tests.gitutil import Repo, index

KY = """export class Ky {
\tasync #fetch(): Promise<Response> {
\t\treturn globalThis.fetch(this.request);
\t}

\tasync #retry(fn: () => Promise<Response>): Promise<Response> {
\t\ttry { return await fn(); } catch { return this.#fetch(); }
\t}
}
"""

MOCKS = "\n".join(f"export function fetch{i}() {{}}\nexport const m{i} = {{ fetch() {{ return fetch('/{i}'); }} }};"
                  for i in range(8))

CLI = '''def echo(message, file=None):
    """Print a message and a newline to the terminal."""
    print(message, file=file)
'''

MAILER = """<?php
class Mailer {
    public function send($to) { return $this->deliver($to); }
    private function deliver($to) { return true; }
}
"""


@pytest.fixture
def project(repo: Repo) -> Repo:
    repo.write("source/core/Ky.ts", KY)
    repo.write("test/mocks.ts", MOCKS)
    repo.write("src/click/utils.py", CLI)
    repo.write("docs/echo.py", "def echo(x):\n    return x\n")
    repo.write("src/Mailer.php", MAILER)
    repo.commit("init")
    index(repo.path)
    return repo


@pytest.mark.parametrize(("question", "symbol", "names"), [
    ("#retry", True, ["#retry"]),
    ("`checkArgument`", True, ["checkArgument"]),
    ("$config", True, ["$config"]),
    ("Ky.#fetch", True, ["Ky.#fetch"]),
    ("what does #retry do", False, ["#retry"]),
    ("why is issue #123 open, asks @octocat", False, []),  # an issue number and a person are no code
    ("it costs $5", False, []),
])
def test_sigils_and_back_quotes_mark_a_code_token(question: str, symbol: bool, names: list[str]) -> None:
    assert is_symbol_query(question) is symbol
    assert query_identifiers(question) == names


def test_written_segments_keep_sigils_and_split_qualifiers() -> None:
    assert written_segments("Ky.#fetch") == ["Ky", "#fetch"]
    assert written_segments("Util#checkArgument") == ["Util", "checkArgument"]
    assert written_segments("$this->send") == ["$this", "send"]
    assert written_segments("Foo::bar") == ["Foo", "bar"]


def test_a_written_name_picks_its_definitions_by_sigil_receiver_and_module(project: Repo) -> None:
    with open_workspace(project.path) as ws:
        lookup = _Lookup(ws, ws.repo.branch(), None)

        def sites(name: str) -> list[tuple[str, str]]:
            return [(s.name, s.path) for s in named_sites(name, False, lookup.definitions)]

        # the bare name means every fetch (the mocks' methods too); the sigil means the private one
        assert len(lookup.definitions("#fetch", False)) > 5
        assert sites("#fetch") == [("Ky.#fetch", "source/core/Ky.ts")]
        assert sites("Ky.#retry") == [("Ky.#retry", "source/core/Ky.ts")]
        assert sites("#echo") == []  # nothing spelled so, and `echo` alone is no code token
        # a qualifier that encloses no definition names the module (or its folder)
        assert lookup.definitions("click.echo", False) == []
        assert sites("click.echo") == sites("utils.echo") == [("echo", "src/click/utils.py")]
        assert sites("$this->deliver") == [("Mailer.deliver", "src/Mailer.php")]


def test_a_private_member_asked_for_comes_first(project: Repo) -> None:
    with open_workspace(project.path) as ws:
        for question, line in [("#fetch", 2), ("where is #fetch defined", 2), ("what does `#retry` do", 6)]:
            top = search(ws, question, k=3, snippets=False)[0]
            assert top.path == "source/core/Ky.ts" and top.start_line <= line <= top.end_line < 100


def test_pin_lifts_named_definitions_just_above_the_rest_keeping_their_order() -> None:
    cands = {"def": Candidate("def", "a.py", 1, 5, score=1.2, pinned=True, named=True),
             "test": Candidate("test", "tests/t.py", 1, 5, score=0.3, pinned=True, named=True),
             "caller": Candidate("caller", "b.py", 1, 5, score=2.0),
             "other": Candidate("other", "c.py", 1, 5, score=0.5)}
    pin_named(cands)
    assert cands["test"].score == pytest.approx(2.02)
    assert cands["def"].score == pytest.approx(2.92)
    assert (cands["caller"].score, cands["other"].score) == (2.0, 0.5)
    ahead = {"def": Candidate("def", "a.py", 1, 5, score=3.0, pinned=True), "x": Candidate("x", "b.py", 1, 5, score=1.0)}
    pin_named(ahead)
    assert ahead["def"].score == 3.0  # already above: nothing moves


def test_only_a_one_token_question_pins() -> None:
    from gitrag.query.ranking.stages import boost_definitions

    def run(question: str) -> dict[str, Candidate]:
        cands = {"x": Candidate("x", "b.py", 1, 5, score=1.0)}
        site = DefinitionSite("lookupName", "a.py", 1, 5)
        boost_definitions(cands, analyse(question), lambda n, exact: [site] if n in ("lookupName", "Writer") else [],
                          lambda s: [Candidate(s.path, s.path, 1, 5)])
        return cands

    assert run("lookupName")["a.py"].pinned and run("`lookupName`")["a.py"].pinned
    assert not run("where is lookupName defined")["a.py"].pinned  # a name in a sentence: the answer may be elsewhere
    assert not run("how does the Writer pick names")["a.py"].pinned
    assert not run("lookupName fails " + "with a long log line " * 20)["a.py"].pinned


def test_past_fixes_never_lift_a_chunk_over_a_named_definition() -> None:
    from gitrag.query.ranking.history_prior import apply_history_prior

    cands = {"def": Candidate("def", "writer.py", 1, 5, score=1.7, named=True),
             "caller": Candidate("caller", "names.py", 1, 5, score=1.0),
             "other": Candidate("other", "misc.py", 1, 5, score=0.9)}
    apply_history_prior(cands, {"names.py": 1.0, "misc.py": 0.5})
    assert (cands["def"].score, cands["caller"].score) == (pytest.approx(3.4), pytest.approx(2.0))
    assert cands["other"].score == pytest.approx(1.35)


REPRO = """XmlMapper serializes a @JsonAppend property twice

```java
public class VirtualBeanPropertyWriterTest {
    @Test
    public void testJsonAppend() throws Exception {
        ObjectMapper mapper = new XmlMapper();
        assertEquals("<Pojo><name>foo</name></Pojo>", mapper.writeValueAsString(new Pojo("foo")));
    }

    public static class MyVirtualPropertyWriter extends VirtualBeanPropertyWriter {
    }
}
```

ObjectMapper for JSON works; XmlMapper writes the virtual property twice. """ + "More words of the issue. " * 8


def _boosted(question: str, *, test_sites: bool = False) -> set[str]:
    from gitrag.query.ranking.stages import boost_definitions

    sites = {"testJsonAppend": [DefinitionSite("testJsonAppend", "src/test/java/failing/JsonAppend578Test.java", 9, 14)],
             "MyVirtualPropertyWriter": [
                 DefinitionSite("MyVirtualPropertyWriter", "src/test/java/failing/JsonAppend578Test.java", 20, 30)],
             "VirtualBeanPropertyWriter": [
                 DefinitionSite("VirtualBeanPropertyWriter", "src/main/java/ser/VirtualBeanPropertyWriter.java", 1, 90)]}
    cands = {"x": Candidate("x", "src/main/java/ser/XmlBeanPropertyWriter.java", 1, 5, score=1.0)}
    boost_definitions(cands, analyse(question), lambda n, exact: sites.get(n, []),
                      lambda s: [Candidate(f"{s.path}:{s.line}", s.path, s.line, s.line + 5)], test_sites=test_sites)
    return {c.path for c in cands.values() if c.key != "x" and c.score > 0}


def test_a_pasted_issue_s_names_boost_implementation_not_the_test_that_copied_its_reproduction() -> None:
    """The regression test that copied the reporter's reproduction defines its names
    (``testJsonAppend``, ``MyVirtualPropertyWriter``): in a pasted text they boost no test file
    (stage ``test-names``); the library class it extends still gains."""
    assert _boosted(REPRO) == {"src/main/java/ser/VirtualBeanPropertyWriter.java"}
    assert "src/test/java/failing/JsonAppend578Test.java" in _boosted(REPRO, test_sites=True)  # the stage off
    # a title asking about a test, or a typed question, still finds test definitions
    assert "src/test/java/failing/JsonAppend578Test.java" in _boosted("The test testJsonAppend fails\n" + REPRO)
    assert _boosted("where is testJsonAppend") == {"src/test/java/failing/JsonAppend578Test.java"}
