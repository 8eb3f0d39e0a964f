"""The import layers of ``gitrag/``, checked from the source (an AST walk; nothing is imported).

    base (gitrag/__init__, errors, config, identity, logs, progress, build)
      < git < index < query < daemon < surfaces
      < entry points (gitrag/__main__.py; gitrag/notify.py, the module installed hooks run)

The rules, each a test below:

1. **Downward only.** A module imports modules of its own layer or of lower ones. Every import
   counts: at module level, under ``if TYPE_CHECKING:`` (a type a lower layer names is a
   dependency all the same) and inside a function (a lazy upward import is the same
   dependency, only hidden). One that truly must stay goes into LAZY_UPWARD with its reason.
2. **No circles.** The graph of gitrag's module-to-module imports has no cycle. Imports that run
   (module level and inside functions) are its edges; ``TYPE_CHECKING`` imports are not (they
   never run and close no circle). A function-level import that closes a circle inside one
   layer is a known debt: it is listed in LAZY_CIRCLE_EDGES with its reason, and the test fails
   both on a new one and on a listed one that is gone (take it off the list).
3. **Private stays home.** A private module or name (``_common``, ``_utf8``) is imported only
   from inside the package that holds it; gitrag/, bench/ and scripts/ are checked (tests may
   reach into privates to test them).
4. **Adapters stay out of the plain modules.** FORBIDDEN: pairs (importer, imported) with the
   reason, e.g. the SQLite state and the sparse encoder never import the vector store.
5. Every module is in a layer: a new module goes into the folder it belongs to, not at the
   top of gitrag/ beside the base modules.

The checker itself is tested on small trees written to a tmp dir and on a copy of the real
tree with an upward import inserted, so a checker that finds nothing cannot pass unnoticed.
"""

from __future__ import annotations

import ast
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

BASE = {"gitrag", "gitrag.errors", "gitrag.config", "gitrag.identity", "gitrag.logs", "gitrag.progress",
        "gitrag.build"}
ENTRY = {"gitrag.__main__", "gitrag.notify"}
LAYERS = ["base", "git", "index", "query", "daemon", "surfaces", "entry"]

#: (importer, imported): an upward import inside a function that must stay, with its reason.
LAZY_UPWARD: dict[tuple[str, str], str] = {}

#: (importer, imported): a function-level import that closes a circle inside one layer, with its
#: reason. Each is a known debt, to be taken off when the two modules are untangled.
LAZY_CIRCLE_EDGES: dict[tuple[str, str], str] = {
    ("gitrag.index.vector_cache", "gitrag.index.state"):
        "the cache borrows the state's SQLite error wording (_disk_errors, _cannot_open); "
        "the state opens the cache at module level",
    ("gitrag.index.integrity", "gitrag.index.views"):
        "the audit compares the store with views.expected, and views checks collections with integrity",
    ("gitrag.index.heal", "gitrag.index.indexer"):
        "heal.rebuild runs a sync, and Indexer.sync runs inside heal.syncing",
    ("gitrag.index.pool", "gitrag.index.indexer"):
        "a pool worker process runs the indexer's per-file steps (_graph, _rows_for); the indexer "
        "starts the pool",
}

#: (importer prefix, imported prefix): imports that must not exist, with the reason.
FORBIDDEN: dict[tuple[str, str], str] = {
    ("gitrag.index.state", "gitrag.index.store"): "the SQLite state holds manifests, not points",
    ("gitrag.index.vector_cache", "gitrag.index.store"): "the vector cache is keyed by chunk, not by point",
    ("gitrag.index.sparse", "gitrag.index.store"): "the sparse encoder makes vectors; the store only keeps them",
    ("gitrag.index.chunking", "gitrag.index.store"): "chunking is pure: bytes in, chunks out",
    ("gitrag.index.chunking", "gitrag.index.embedders"): "chunks do not depend on a model",
    ("gitrag.index.embedders", "gitrag.index.store"): "an embedder turns texts into vectors, nothing more",
    ("gitrag.daemon.protocol", "gitrag.index"): "the hook path: standard library only",
    ("gitrag.daemon.client", "gitrag.index"): "the hook path: standard library only",
    ("gitrag.daemon.spool", "gitrag.index"): "the hook path: standard library only",
}


@dataclass(frozen=True)
class Import:
    importer: str  # dotted module name, e.g. gitrag.index.views
    imported: str  # the module the import loads (a name imported from a module counts as that module)
    names: tuple[str, ...]  # the names it takes (from X import a, b), () for `import X`
    lazy: bool  # inside a function
    type_only: bool  # under `if TYPE_CHECKING:`
    where: str  # path:line


def module_names(root: Path, package: str = "gitrag") -> dict[str, Path]:
    """{dotted name: file} of every module under ``root/package`` (a package is its __init__)."""
    out = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports_of(name: str, path: Path, known: dict[str, Path], root: Path) -> list[Import]:
    """The imports of first-party modules (``known``) in the module ``name`` at ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    is_package = path.name == "__init__.py"
    where = path.relative_to(root)
    found: list[Import] = []

    def targets(node: ast.Import | ast.ImportFrom) -> list[tuple[str, tuple[str, ...]]]:
        if isinstance(node, ast.Import):
            return [(a.name, ()) for a in node.names]
        if node.level:
            base = name.split(".") if is_package else name.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            module = ".".join(base + ([node.module] if node.module else []))
        else:
            module = node.module or ""
        out = []
        for alias in node.names:  # `from pkg import mod` loads the module pkg.mod
            sub = f"{module}.{alias.name}"
            out.append((sub, ()) if sub in known else (module, (alias.name,)))
        return out

    def walk(node: ast.AST, lazy: bool, type_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                for module, names in targets(child):
                    if module in known:
                        found.append(Import(name, module, names, lazy, type_only, f"{where}:{child.lineno}"))
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.body:
                    walk(ast.Module(body=[stmt], type_ignores=[]), lazy, True)
                for stmt in child.orelse:
                    walk(ast.Module(body=[stmt], type_ignores=[]), lazy, type_only)
            else:
                walk(child, lazy or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef), type_only)

    walk(tree, False, False)
    return found


def all_imports(root: Path, package: str = "gitrag") -> list[Import]:
    known = module_names(root, package)
    return [imp for name, path in known.items() for imp in imports_of(name, path, known, root)]


def layer_of(module: str) -> str | None:
    if module in BASE:
        return "base"
    if module in ENTRY:
        return "entry"
    parts = module.split(".")
    if len(parts) > 2 and parts[1] in LAYERS:
        return parts[1]
    if len(parts) == 2 and parts[1] in LAYERS:  # the layer's package itself (its __init__)
        return parts[1]
    return None


def unplaced(root: Path) -> list[str]:
    return sorted(m for m in module_names(root) if layer_of(m) is None)


def upward(imports: list[Import], allowed: dict[tuple[str, str], str] = LAZY_UPWARD) -> list[str]:
    out = []
    for imp in imports:
        low, high = layer_of(imp.importer), layer_of(imp.imported)
        if low is None or high is None or LAYERS.index(high) <= LAYERS.index(low):
            continue
        if imp.lazy and (imp.importer, imp.imported) in allowed:
            continue
        out.append(f"{imp.where}: {imp.importer} ({low}) imports {imp.imported} ({high})"
                   + (" inside a function" if imp.lazy else ""))
    return out


def circles(imports: list[Import], allowed: dict[tuple[str, str], str] = LAZY_CIRCLE_EDGES) -> list[list[str]]:
    """Each cycle of the graph of run-time imports (less the allowed lazy edges): its modules
    (a strongly connected component of two or more), sorted."""
    graph: dict[str, set[str]] = {}
    for imp in imports:
        if imp.type_only or imp.importer == imp.imported:
            continue
        if imp.lazy and (imp.importer, imp.imported) in allowed:
            continue
        graph.setdefault(imp.importer, set()).add(imp.imported)
        graph.setdefault(imp.imported, set())
    # Tarjan's strongly connected components, iterative (no recursion limit on deep chains)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def stale_circle_edges(imports: list[Import], allowed: dict[tuple[str, str], str] = LAZY_CIRCLE_EDGES) -> list[str]:
    """Listed edges that are no longer a lazy import closing a circle."""
    lazy = {(i.importer, i.imported) for i in imports if i.lazy and not i.type_only}
    out = []
    for edge in allowed:
        if edge not in lazy:
            out.append(f"{edge[0]} -> {edge[1]}: no longer imported inside a function")
        elif not any(edge[0] in c and edge[1] in c for c in circles(imports, {e: r for e, r in allowed.items()
                                                                              if e != edge})):
            out.append(f"{edge[0]} -> {edge[1]}: closes no circle any more")
    return out


def _private(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__")


def private_imports(root: Path, packages: tuple[str, ...] = ("gitrag", "bench", "scripts")) -> list[str]:
    """Imports of a private module or name from outside the package that holds it."""
    known = module_names(root, "gitrag")
    out = []
    for package in packages:
        if not (root / package).is_dir():
            continue
        for name, path in module_names(root, package).items():
            for imp in imports_of(name, path, known, root):
                parts = imp.imported.split(".")
                private_at = next((i for i, p in enumerate(parts) if _private(p)), None)
                if private_at is not None:
                    owner = ".".join(parts[:private_at])
                    what = imp.imported
                else:
                    private_names = [n for n in imp.names if _private(n)]
                    if not private_names:
                        continue
                    # the package holding the module that defines them (a package: itself)
                    owner = imp.imported if known[imp.imported].name == "__init__.py" else ".".join(parts[:-1])
                    what = f"{imp.imported}.{', '.join(private_names)}"
                line = f"{imp.where}: {name} imports the private {what} (private to {owner})"
                if not (name == owner or name.startswith(owner + ".")) and line not in out:
                    out.append(line)
    return out


def forbidden(imports: list[Import], rules: dict[tuple[str, str], str] = FORBIDDEN) -> list[str]:
    def under(module: str, prefix: str) -> bool:
        return module == prefix or module.startswith(prefix + ".")

    return [f"{imp.where}: {imp.importer} imports {imp.imported}: {reason}"
            for imp in imports for (a, b), reason in rules.items()
            if under(imp.importer, a) and under(imp.imported, b)]


#: Modules outside gitrag/git/ that may still reach the raw pygit2 repository (``GitRepo.repo``), with the reason.
RAW_GIT: dict[str, str] = {}


def _raw_git_access(node: ast.AST) -> bool:
    """``<x>.repo.repo``, ``repo.repo`` or ``GitRepo(...).repo``: the pygit2 repository behind a GitRepo."""
    if not (isinstance(node, ast.Attribute) and node.attr == "repo"):
        return False
    base = node.value
    return (isinstance(base, ast.Attribute) and base.attr == "repo") or (isinstance(base, ast.Name) and base.id == "repo") \
        or (isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id == "GitRepo")


def raw_git(root: Path, allowed: dict[str, str] = RAW_GIT) -> list[str]:
    """``path:line`` of each raw pygit2 access outside gitrag/git/ and the allowed modules
    (docs/architecture.md: only gitrag/git/ talks to git), then each allowed module that no
    longer has one (take it off the list)."""
    out, seen = [], set()
    for name, path in sorted(module_names(root).items()):
        if name.startswith("gitrag.git.") or name == "gitrag.git":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if _raw_git_access(node):
                seen.add(name)
                if name not in allowed:
                    out.append(f"{path.relative_to(root)}:{getattr(node, 'lineno', 0)}: {name} reads GitRepo.repo")
    return out + [f"{name} is listed in RAW_GIT but reads GitRepo.repo no more" for name in allowed if name not in seen]


# --- the real tree ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def real() -> list[Import]:
    return all_imports(ROOT)


def test_every_module_is_in_a_layer() -> None:
    assert unplaced(ROOT) == []


def test_imports_go_only_downward(real: list[Import]) -> None:
    assert upward(real) == []


def test_no_import_circles(real: list[Import]) -> None:
    assert circles(real) == []


def test_listed_lazy_circles_still_exist(real: list[Import]) -> None:
    assert stale_circle_edges(real) == []


def test_private_names_stay_in_their_package() -> None:
    assert private_imports(ROOT) == []


def test_forbidden_imports(real: list[Import]) -> None:
    assert forbidden(real) == []


def test_only_the_git_layer_reaches_raw_pygit2() -> None:
    assert raw_git(ROOT) == []


def test_the_walk_sees_the_tree(real: list[Import]) -> None:
    """The checker reads the real imports: a few known edges are among them."""
    edges = {(i.importer, i.imported) for i in real}
    assert ("gitrag.surfaces.cli", "gitrag.errors") in edges
    assert ("gitrag.notify", "gitrag.daemon.notify") in edges
    assert len(real) > 300


# --- the checker on made-up trees -------------------------------------------------------------------

def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for package in {p.parent for p in tmp_path.rglob("*.py")}:
        (package / "__init__.py").touch()
    return tmp_path


def test_checker_finds_an_upward_import_in_a_copy_of_the_real_tree(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "gitrag", tmp_path / "gitrag", ignore=shutil.ignore_patterns("models", "__pycache__"))
    repo = tmp_path / "gitrag" / "git" / "repo.py"
    repo.write_text(repo.read_text(encoding="utf-8") + "\nfrom gitrag.query import retrieval\n", encoding="utf-8")
    found = upward(all_imports(tmp_path))
    assert len(found) == 1
    assert "gitrag.git.repo (git) imports gitrag.query.retrieval (query)" in found[0]


def test_checker_finds_lazy_and_type_only_upward_imports(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "gitrag/index/a.py": "def f():\n    from gitrag.daemon import b\n",
        "gitrag/index/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from gitrag.surfaces.d import X\n",
        "gitrag/daemon/b.py": "from gitrag.index import a\n",  # downward: fine
        "gitrag/surfaces/d.py": "X = 1\n",
    })
    found = upward(all_imports(root))
    assert [f.split(": ", 1)[1] for f in found] == [
        "gitrag.index.a (index) imports gitrag.daemon.b (daemon) inside a function",
        "gitrag.index.c (index) imports gitrag.surfaces.d (surfaces)",
    ]
    assert upward(all_imports(root), {("gitrag.index.a", "gitrag.daemon.b"): "a reason"}) == [found[1]]


def test_checker_resolves_relative_and_package_imports(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "gitrag/git/x.py": "from ..query import y\nfrom . import z\n",
        "gitrag/git/z.py": "",
        "gitrag/query/y.py": "",
    })
    edges = {(i.importer, i.imported) for i in all_imports(root)}
    assert edges == {("gitrag.git.x", "gitrag.query.y"), ("gitrag.git.x", "gitrag.git.z")}
    assert len(upward(all_imports(root))) == 1


def test_checker_finds_a_circle_and_knows_type_only_imports_close_none(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "gitrag/index/a.py": "from gitrag.index import b\n",
        "gitrag/index/b.py": "def f():\n    from gitrag.index.c import g\n",
        "gitrag/index/c.py": "import gitrag.index.a\ndef g(): pass\n",
        "gitrag/index/d.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from gitrag.index.e import E\n",
        "gitrag/index/e.py": "from gitrag.index.d import *\nclass E: pass\n",
    })
    imports = all_imports(root)
    assert circles(imports, {}) == [["gitrag.index.a", "gitrag.index.b", "gitrag.index.c"]]
    allowed = {("gitrag.index.b", "gitrag.index.c"): "a reason"}
    assert circles(imports, allowed) == []
    assert stale_circle_edges(imports, allowed) == []
    assert stale_circle_edges(imports, {("gitrag.index.a", "gitrag.index.e"): "gone"}) == [
        "gitrag.index.a -> gitrag.index.e: no longer imported inside a function"]


def test_checker_finds_private_imports_across_packages(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "gitrag/index/store/_common.py": "X = 1\n",
        "gitrag/index/store/edge.py": "from gitrag.index.store._common import X\ndef _du(): pass\n",
        "gitrag/index/views.py": "from gitrag.index.store._common import X\n",
        "gitrag/query/w.py": "from gitrag.index.store.edge import _du\n",
        "bench/b.py": "from gitrag.index.store import edge\nfrom gitrag.index.store.edge import _du\n",
    })
    found = [f.split(": ", 1)[1] for f in private_imports(root)]
    assert found == [
        "gitrag.index.views imports the private gitrag.index.store._common (private to gitrag.index.store)",
        "gitrag.query.w imports the private gitrag.index.store.edge._du (private to gitrag.index.store)",
        "bench.b imports the private gitrag.index.store.edge._du (private to gitrag.index.store)",
    ]


def test_checker_finds_a_module_outside_the_layers(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"gitrag/errors.py": "", "gitrag/sidecar.py": "", "gitrag/query/q.py": ""})
    assert unplaced(root) == ["gitrag.sidecar"]


def test_checker_finds_a_forbidden_import(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "gitrag/index/state.py": "from gitrag.index.store.base import SparseVec\n",
        "gitrag/index/store/base.py": "SparseVec = 1\n",
    })
    found = forbidden(all_imports(root))
    assert len(found) == 1 and "the SQLite state holds manifests, not points" in found[0]


def test_checker_finds_raw_pygit2_outside_the_git_layer(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "gitrag/git/repo.py": "def head(self):\n    return self.repo.head\n",
        "gitrag/query/rev.py": "def tip(ws):\n    return ws.repo.repo.head\n",
        "gitrag/daemon/gc.py": "def trees(repo):\n    return repo.repo.list_worktrees()\n",
        "gitrag/index/team.py": "def root(ws):\n    return ws.repo.root_commits()\n",
    })
    assert raw_git(root, {}) == ["gitrag/daemon/gc.py:2: gitrag.daemon.gc reads GitRepo.repo",
                                 "gitrag/query/rev.py:2: gitrag.query.rev reads GitRepo.repo"]
    assert raw_git(root, {"gitrag.index.team": "why"})[-1] == \
        "gitrag.index.team is listed in RAW_GIT but reads GitRepo.repo no more"
