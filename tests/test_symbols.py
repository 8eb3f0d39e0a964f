"""Symbol graph queries on a real indexed repository.

The graph rows are written here in the exact shape the tree-sitter chunker records
(``gitrag.index.chunking.graph``: qualified names, references as written), so these tests do
not depend on which chunker is installed.
"""

from __future__ import annotations

from typing import Any

import pytest

from gitrag.errors import NotIndexed
from gitrag.index import symbols
from gitrag.index.chunking import CHUNKER_VERSION
from gitrag.index.indexer import Indexer
from gitrag.index.symbols import Definition, dependencies, file_outline, find_definitions
from gitrag.index.workspace import Workspace, open_workspace
from tests.gitutil import Repo


def _d(name: str, kind: str, start: int, end: int, parent: str = "") -> dict[str, Any]:
    return {"name": name, "kind": kind, "start_line": start, "end_line": end, "parent": parent}


def _r(kind: str, source: str, target: str, line: int) -> dict[str, Any]:
    return {"kind": kind, "source": source, "target": target, "line": line}


GRAPHS: dict[str, dict[str, Any]] = {
    "app/base.py": {"language": "python", "definitions": [
        _d("Base", "class", 1, 6), _d("Base.describe", "method", 4, 6, "Base"),
        _d("helper", "function", 9, 10),
    ], "references": []},
    "app/greeter.py": {"language": "python", "definitions": [
        _d("Greeter", "class", 5, 17), _d("Greeter.__init__", "method", 8, 9, "Greeter"),
        _d("Greeter.greet", "method", 11, 14, "Greeter"),
        _d("Greeter.greet.inner", "method", 12, 13, "Greeter.greet"),
        _d("Greeter._fmt", "method", 16, 17, "Greeter"),
        _d("main", "function", 20, 22),
    ], "references": [
        _r("import", "", "os", 1), _r("import", "", "app.base.Base", 2), _r("import", "", "app.base.helper", 2),
        _r("import", "", "json", 3),
        _r("inherit", "Greeter", "Base", 5),
        _r("call", "Greeter.greet.inner", "helper", 13), _r("call", "Greeter.greet", "self._fmt", 14),
        _r("call", "Greeter.greet", "os.path.join", 14), _r("call", "Greeter.greet", "inner", 14),
        _r("call", "Greeter._fmt", "s.upper", 17),
        _r("call", "main", "Greeter", 21), _r("call", "main", "print", 22), _r("call", "main", "g.greet", 22),
    ]},
    "app/loud.py": {"language": "python", "definitions": [
        _d("LoudGreeter", "class", 3, 6, ""), _d("LoudGreeter._fmt", "method", 5, 6, "LoudGreeter"),
    ], "references": [
        _r("import", "", "app.greeter.Greeter", 1), _r("inherit", "LoudGreeter", "Greeter", 3),
        _r("call", "LoudGreeter._fmt", "super()._fmt", 6),
    ]},
    "src/lib.rs": {"language": "rust", "definitions": [
        _d("Parser", "struct", 1, 3), _d("Parser::parse", "method", 6, 9, "Parser"),
    ], "references": [_r("call", "Parser::parse", "Self::helper", 7)]},
}


def _write_files(repo: Repo) -> None:
    for path in GRAPHS:
        repo.write(path, "\n".join(f"# {path} line {i}" for i in range(1, 30)) + "\n")
    repo.write("README.md", "# readme\n")


def inject_graphs(ws: Workspace, graphs: dict[str, dict[str, Any]] = GRAPHS) -> None:
    """Write graph rows for the current branch's blobs, as the indexer does."""
    files = ws.state.files(ws.repo.branch())
    for path, graph in graphs.items():
        ws.state.put_symbols(files[path].blob, CHUNKER_VERSION, graph)
    symbols.clear_cache()


@pytest.fixture
def ws(repo: Repo) -> Workspace:
    _write_files(repo)
    repo.commit("graph")
    w = open_workspace(repo.path)
    Indexer(w).sync()
    inject_graphs(w)
    yield w
    w.close()


def test_find_exact_then_suffix(ws: Workspace) -> None:
    names = [d.name for d in find_definitions(ws, "_fmt")]
    assert names == ["Greeter._fmt", "LoudGreeter._fmt"]
    (d,) = find_definitions(ws, "Greeter.greet")
    assert (d.path, d.start_line, d.end_line, d.kind, d.parent, d.language) == (
        "app/greeter.py", 11, 14, "method", "Greeter", "python")
    assert [d.name for d in find_definitions(ws, "Greeter")] == ["Greeter"]  # exact only: LoudGreeter is no suffix
    assert [d.name for d in find_definitions(ws, "greet.inner")] == ["Greeter.greet.inner"]


def test_separators_case_and_path(ws: Workspace) -> None:
    assert [d.name for d in find_definitions(ws, "Parser.parse")] == ["Parser::parse"]
    assert [d.name for d in find_definitions(ws, "Parser::parse")] == ["Parser::parse"]
    assert [d.name for d in find_definitions(ws, "greeter.GREET")] == ["Greeter.greet"]  # case-insensitive fallback
    assert [d.name for d in find_definitions(ws, "_fmt", path="app/loud.py")] == ["LoudGreeter._fmt"]
    assert find_definitions(ws, "nothing_like_this") == [] and find_definitions(ws, "  ") == []


def test_outline_in_source_order(ws: Workspace) -> None:
    outline = file_outline(ws, "app/greeter.py")
    assert [(d.name, d.start_line) for d in outline] == [
        ("Greeter", 5), ("Greeter.__init__", 8), ("Greeter.greet", 11), ("Greeter.greet.inner", 12),
        ("Greeter._fmt", 16), ("main", 20)]
    assert file_outline(ws, "README.md") == []
    with pytest.raises(symbols.NotFound, match="not in the index"):
        file_outline(ws, "app/missing.py")


def _names(links: list[symbols.Link]) -> list[tuple[str, str | None]]:
    return [(link.name, link.definition.name if link.definition else None) for link in links]


def test_callees_resolve_same_class_first_and_keep_external(ws: Workspace) -> None:
    deps = dependencies(ws, "Greeter.greet")
    assert _names(deps["callees"]) == [
        ("helper", "helper"),  # from the nested function, resolved to app/base.py
        ("self._fmt", "Greeter._fmt"),  # self. inside Greeter: not LoudGreeter._fmt
        ("os.path.join", None),  # outside the index
        ("inner", "Greeter.greet.inner"),
    ]
    helper = deps["callees"][0]
    assert (helper.path, helper.line, helper.hop, helper.definition.path) == ("app/greeter.py", 13, 1, "app/base.py")
    assert [link.name for link in deps["imports"]] == ["os", "app.base.helper"]  # json is not used by greet
    assert deps["imports"][1].definition == find_definitions(ws, "helper")[0]


def test_callers_and_hops(ws: Workspace) -> None:
    callers = dependencies(ws, "Greeter._fmt")["callers"]
    assert [(link.name, link.path, link.line) for link in callers] == [
        ("Greeter.greet", "app/greeter.py", 14), ("LoudGreeter._fmt", "app/loud.py", 6)]  # super()._fmt
    two = dependencies(ws, "Greeter._fmt", hops=2)["callers"]
    assert [(link.name, link.hop) for link in two] == [("Greeter.greet", 1), ("LoudGreeter._fmt", 1), ("main", 2)]
    assert _names(dependencies(ws, "LoudGreeter._fmt")["callees"]) == [("super()._fmt", "Greeter._fmt")]
    assert dependencies(ws, "Greeter", hops=1)["callers"][0].name == "main"  # the constructor call


def test_bases_and_subclasses(ws: Workspace) -> None:
    deps = dependencies(ws, "Greeter")
    assert _names(deps["bases"]) == [("Base", "Base")]
    assert _names(deps["subclasses"]) == [("LoudGreeter", "LoudGreeter")]
    assert [d.definition.name for d in dependencies(ws, "LoudGreeter", hops=2)["bases"]] == ["Greeter", "Base"]
    assert [d.name for d in dependencies(ws, "Base", hops=3)["subclasses"]] == ["Greeter", "LoudGreeter"]


def test_unknown_symbol_and_definition_argument(ws: Workspace) -> None:
    assert dependencies(ws, "no_such_symbol") == {rel: [] for rel in symbols.RELATIONS}
    d = find_definitions(ws, "main")[0]
    assert isinstance(d, Definition)
    assert _names(dependencies(ws, d)["callees"]) == [("Greeter", "Greeter"), ("print", None), ("g.greet", "Greeter.greet")]


def test_cache_follows_the_indexed_commit(ws: Workspace, repo: Repo) -> None:
    first = symbols.symbol_index(ws)
    assert symbols.symbol_index(ws) is first  # cached
    repo.write("app/extra.py", "x = 1\n")
    repo.commit("more")
    Indexer(ws).sync()
    assert symbols.symbol_index(ws) is not first
    assert "app/extra.py" in symbols.symbol_index(ws).paths


def test_unindexed_branch_raises(repo: Repo) -> None:
    repo.write("a.py", "x = 1\n")
    repo.commit("one")
    w = open_workspace(repo.path)
    try:
        with pytest.raises(NotIndexed, match="gitrag index"):
            find_definitions(w, "x")
    finally:
        w.close()


# -- module-level bindings, from the real tree-sitter grammars --------------------------------

GLOBALS_PY = '''\
"""Context globals."""
from werkzeug.local import LocalProxy

__all__ = ["g", "request"]
CHUNK_OVERLAP = 10
FORCED_WIDTH: int | None = None
g: "AppGlobals" = LocalProxy(
    _cv_app, "g"
)
request = session = LocalProxy(_cv_request)
low, high = 0, 9
_ = "ignored"
obj.attr = 1
table["key"] = 2


def helper() -> int:
    local_total = CHUNK_OVERLAP + 1
    return local_total


class Config:
    DEBUG = False

    def load(self) -> None:
        self.loaded = True
'''

CONSTANTS_TS = '''\
export const API_ROOT = "/v1";
let retries = 3;
const { readFile } = require("fs");
function fetchAll() {
  const inner_limit = 5;
  return inner_limit;
}
'''

CONSTANTS_GO = '''\
package conf

const MaxDepth = 8

var (
	DefaultName = "x"
)

func Depth() int {
	const localDepth = 1
	return localDepth
}
'''

CONSTANTS_RS = '''\
pub const MAX_ITEMS: usize = 64;
static GREETING: &str = "hi";

pub struct Pool;

impl Pool {
    pub const SIZE: usize = 4;

    pub fn get() -> usize {
        const LOCAL_CAP: usize = 2;
        LOCAL_CAP
    }
}
'''


@pytest.fixture
def globals_ws(repo: Repo) -> Workspace:
    """A repository indexed by the real chunker (no injected graph rows)."""
    repo.write("app/globals.py", GLOBALS_PY)
    repo.write("web/api.ts", CONSTANTS_TS)
    repo.write("conf/conf.go", CONSTANTS_GO)
    repo.write("src/pool.rs", CONSTANTS_RS)
    repo.commit("module-level bindings")
    w = open_workspace(repo.path)
    Indexer(w).sync()
    symbols.clear_cache()
    yield w
    w.close()


def _one(ws: Workspace, name: str) -> tuple[str, str, int, int, str]:
    (d,) = find_definitions(ws, name)
    return d.path, d.name, d.start_line, d.end_line, d.kind


def test_module_level_assignments_are_definitions(globals_ws: Workspace) -> None:
    ws = globals_ws
    assert _one(ws, "CHUNK_OVERLAP") == ("app/globals.py", "CHUNK_OVERLAP", 5, 5, "variable")
    assert _one(ws, "FORCED_WIDTH") == ("app/globals.py", "FORCED_WIDTH", 6, 6, "variable")
    assert _one(ws, "g") == ("app/globals.py", "g", 7, 9, "variable")  # the proxy, all its lines
    assert _one(ws, "request")[1:3] == ("request", 10) and _one(ws, "session")[1:3] == ("session", 10)
    assert _one(ws, "low")[2] == 11 and _one(ws, "high")[2] == 11
    outline = [(d.name, d.kind) for d in file_outline(ws, "app/globals.py")]
    assert outline == [("CHUNK_OVERLAP", "variable"), ("FORCED_WIDTH", "variable"), ("g", "variable"),
                       ("request", "variable"), ("session", "variable"), ("low", "variable"),
                       ("high", "variable"), ("helper", "function"), ("Config", "class"),
                       ("Config.load", "method")]


def test_local_attribute_and_dunder_bindings_are_not_definitions(globals_ws: Workspace) -> None:
    ws = globals_ws
    for name in ("local_total", "DEBUG", "Config.DEBUG", "loaded", "__all__", "_", "attr", "obj.attr",
                 "table", "inner_limit", "readFile", "localDepth", "LOCAL_CAP"):
        assert find_definitions(ws, name) == [], name


def test_top_level_constants_of_other_languages(globals_ws: Workspace) -> None:
    ws = globals_ws
    assert _one(ws, "API_ROOT") == ("web/api.ts", "API_ROOT", 1, 1, "constant")
    assert _one(ws, "retries") == ("web/api.ts", "retries", 2, 2, "variable")
    assert _one(ws, "MaxDepth") == ("conf/conf.go", "MaxDepth", 3, 3, "constant")
    assert _one(ws, "DefaultName") == ("conf/conf.go", "DefaultName", 6, 6, "variable")
    assert _one(ws, "MAX_ITEMS") == ("src/pool.rs", "MAX_ITEMS", 1, 1, "constant")
    assert _one(ws, "GREETING") == ("src/pool.rs", "GREETING", 2, 2, "variable")
    (size,) = find_definitions(ws, "Pool::SIZE")
    assert (size.name, size.kind, size.parent, size.start_line) == ("Pool::SIZE", "constant", "Pool", 7)
