"""The grammar wheels: one per language, loaded lazily, never the language pack."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from gitrag.index.chunking.languages import SPECS
from gitrag.index.chunking.treesitter import GRAMMARS, get_language

# One small file per tree-sitter language of the chunker, each with a definition.
SAMPLES = {
    "python": ("a.py", "def run(x):\n    return x\n"),
    "javascript": ("a.js", "function run(x) { return x; }\n"),
    "typescript": ("a.ts", "function run(x: number): number { return x; }\n"),
    "tsx": ("a.tsx", "function Run() { return <div/>; }\n"),
    "go": ("a.go", "package a\n\nfunc Run(x int) int { return x }\n"),
    "rust": ("a.rs", "fn run(x: i32) -> i32 { x }\n"),
    "java": ("A.java", "class A { int run(int x) { return x; } }\n"),
    "kotlin": ("A.kt", "fun run(x: Int): Int {\n    return x\n}\n"),
    "c": ("a.c", "int run(int x) { return x; }\n"),
    "cpp": ("a.cpp", "namespace n { int run(int x) { return x; } }\n"),
    "csharp": ("A.cs", "class A { int Run(int x) { return x; } }\n"),
    "php": ("a.php", "<?php\nfunction run($x) { return $x; }\n"),
    "ruby": ("a.rb", "def run(x)\n  x\nend\n"),
}

_CHILD = textwrap.dedent("""
    import json, sys
    from gitrag.index.chunking import analyze
    seen = {}
    for path, source in json.loads(sys.argv[1]):
        a = analyze(path, source.encode(), max_tokens=256)
        seen[a.language] = {"defs": [d.name for d in a.definitions], "fallback": a.fallback_reason,
                            "modules": sorted(m for m in sys.modules if m.startswith("tree_sitter"))}
    print(json.dumps(seen))
""")


def _run_child(files: list[tuple[str, str]]) -> dict[str, dict]:
    out = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(files)], capture_output=True,
                         text=True, check=True, timeout=120)
    return json.loads(out.stdout)


def test_every_language_has_a_grammar_wheel() -> None:
    assert set(GRAMMARS) == set(SPECS) == set(SAMPLES)


def test_parsing_all_languages_never_imports_the_language_pack() -> None:
    seen = _run_child(list(SAMPLES.values()))
    assert set(seen) == set(SAMPLES)
    for language, result in seen.items():
        assert result["fallback"] == "" and result["defs"], (language, result)
        assert "tree_sitter_language_pack" not in result["modules"], (language, result["modules"])


def test_a_grammar_wheel_is_imported_only_when_its_language_is_parsed() -> None:
    order = ["python", "rust", "tsx"]
    seen = _run_child([SAMPLES[lang] for lang in order])
    wheels = {GRAMMARS[lang][0] for lang in SPECS}
    for i, language in enumerate(order):
        loaded = set(seen[language]["modules"]) & wheels
        assert loaded == {GRAMMARS[lang][0] for lang in order[: i + 1]}, (language, loaded)


def test_node_types_of_the_specs_exist_in_the_pinned_grammars() -> None:
    """A grammar release that renames a node type the chunker names fails here, not silently
    in the chunks. JavaScript shares its tables with TypeScript: those are checked together."""
    js = ("javascript", "typescript", "tsx")
    families = dict.fromkeys(js, js)
    for name, spec in SPECS.items():
        types = (spec.functions | spec.containers | spec.types | spec.namespaces | spec.wrappers
                 | spec.attach | spec.imports | spec.special)
        grammars = [get_language(lang) for lang in families.get(name, (name,))]
        unknown = sorted(t for t in types
                         if all(g.id_for_node_kind(t, True) is None for g in grammars))
        assert not unknown, (name, unknown)


def test_each_thread_parses_with_its_own_parser() -> None:
    """A tree_sitter Parser is not thread-safe: the daemon's sync worker and its work-tree
    warm-up parsed with one shared Parser at once and the daemon died in tree-sitter's C
    code. Each thread gets its own; many parses at once from several threads all succeed."""
    import threading

    from gitrag.index.chunking import treesitter

    got: dict[str, object] = {}
    data = b"".join(b"def f%d(x):\n    return [i * x for i in range(%d)]\n\n" % (i, i) for i in range(3000))
    errors: list[str] = []

    def work(name: str) -> None:
        got[name] = treesitter.get_parser("python")
        for _ in range(5):
            tree, reason = treesitter.parse("python", data)
            if tree is None or tree.root_node.has_error:
                errors.append(reason or "error nodes")

    threads = [threading.Thread(target=work, args=(f"t{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(p) for p in got.values()}) == 4  # one parser per thread
    assert treesitter.get_parser("python") is treesitter.get_parser("python")  # cached within a thread
    assert errors == []
