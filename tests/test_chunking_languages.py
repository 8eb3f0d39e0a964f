"""Golden tests of the chunker, language by language: names, attachment, splitting, graph."""

from __future__ import annotations

import textwrap

import pytest

from gitrag.index.chunking import CHUNKER_VERSION, analyze, language_for
from gitrag.index.chunking.model import Chunk, FileAnalysis
from gitrag.index.chunking.text import abbreviate_path
from gitrag.index.embedders.hashing import HashEmbedder

COUNT = HashEmbedder().count_tokens


def run(path: str, source: str, max_tokens: int = 512) -> FileAnalysis:
    data = textwrap.dedent(source).lstrip("\n").encode()
    analysis = analyze(path, data, max_tokens=max_tokens, count_tokens=COUNT)
    assert b"".join(data[c.start_byte : c.end_byte] for c in analysis.chunks) == data
    assert all(COUNT(c.text) <= max_tokens for c in analysis.chunks)
    return analysis


def symbols(analysis: FileAnalysis) -> list[str]:
    return [c.symbol for c in analysis.chunks]


def body(chunk: Chunk) -> str:
    """The chunk's embedding text without its header (the symbol and enclosing signatures)."""
    lines = chunk.text.split("\n")
    while lines and lines[0] and (lines[0] == chunk.symbol or lines[0].rstrip("…") in chunk.context):
        lines.pop(0)
    return "\n".join(lines)


def chunk_with(analysis: FileAnalysis, needle: str) -> Chunk:
    """The chunk whose source contains ``needle`` (exactly one must)."""
    found = [c for c in analysis.chunks if needle in body(c)]
    assert len(found) == 1, (needle, symbols(analysis))
    return found[0]


def refs(analysis: FileAnalysis, kind: str) -> set[tuple[str, str]]:
    return {(r.source, r.target) for r in analysis.references if r.kind == kind}


def defs(analysis: FileAnalysis) -> dict[str, tuple[str, str]]:
    return {d.name: (d.kind, d.parent) for d in analysis.definitions}


def test_version_bumped() -> None:
    assert CHUNKER_VERSION.isdigit() and int(CHUNKER_VERSION) >= 1  # "0" was the placeholder


# --- Python ---------------------------------------------------------------------------

PYTHON = '''
    """Module docstring."""
    import os
    from collections import OrderedDict as OD

    CHUNK_OVERLAP = 10
    MAX_SIZE, MIN_SIZE = 100, 1


    # Helper comment attached to the function below.
    @functools.lru_cache(maxsize=None)
    def helper(x: int) -> int:
        """Docstring stays."""
        def inner(y):
            return y * 2
        return inner(os.path.join(x))


    class Store(Base, metaclass=Meta):
        """A store."""

        limit = 3

        def __init__(self, path):
            self.path = path
            self.items = OD()
            self.load(path)

        @property
        def size(self) -> int:
            return len(self.items) + sum(i.size for i in self.items.values())

        async def save(self):
            await write(self.path, [item.dump() for item in self.items.values()])


    if __name__ == "__main__":
        helper(1)
'''


def test_python_names_and_module_chunks() -> None:
    analysis = run("gitrag/index/store.py", PYTHON)
    assert chunk_with(analysis, "CHUNK_OVERLAP = 10").kind == "module"
    assert "CHUNK_OVERLAP" in chunk_with(analysis, "CHUNK_OVERLAP = 10").symbol.split(", ")
    assert "<imports>" in chunk_with(analysis, "import os").symbol
    helper = chunk_with(analysis, "def helper")
    assert helper.symbol == "helper" and helper.kind == "function"
    for attached in ("# Helper comment", "@functools.lru_cache", '"""Docstring stays."""',
                     "def inner"):
        assert attached in helper.text  # comment, decorator, docstring, nested function
    assert chunk_with(analysis, "class Store").symbol == "Store"
    assert chunk_with(analysis, "__main__").symbol == "<module>"


def test_python_class_over_budget_splits_into_methods_with_context() -> None:
    analysis = run("gitrag/index/store.py", PYTHON, max_tokens=64)
    init = chunk_with(analysis, "def __init__")
    assert init.symbol.split(", ")[0] == "Store.__init__"
    assert init.kind == "method"
    assert init.context == "class Store(Base, metaclass=Meta):"
    assert init.text.splitlines()[1] == "class Store(Base, metaclass=Meta):"
    size = chunk_with(analysis, "def size")
    assert "@property" in size.text and "Store.size" in size.symbol
    assert "Store" in chunk_with(analysis, '"""A store."""').symbol


def test_python_graph() -> None:
    analysis = run("gitrag/index/store.py", PYTHON)
    found = defs(analysis)
    assert found["helper"] == ("function", "")
    assert found["helper.inner"] == ("function", "helper")
    assert found["Store"] == ("class", "")
    assert found["Store.save"] == ("method", "Store")
    assert {("", "os"), ("", "collections.OrderedDict")} <= refs(analysis, "import")
    assert ("Store", "Base") in refs(analysis, "inherit")
    assert ("Store", "Meta") not in refs(analysis, "inherit")  # a keyword, not a base
    calls = refs(analysis, "call")
    assert {("helper", "os.path.join"), ("helper", "inner"), ("Store.__init__", "self.load"),
            ("", "helper")} <= calls


def test_python_oversized_function_fragments_keep_the_name() -> None:
    body = "\n".join(f"    value_{i} = compute_{i}(value_{i - 1}, 'argument')" for i in range(1, 60))
    analysis = run("big.py", f"def big(value_0):\n{body}\n    return value_59\n", max_tokens=128)
    assert len(analysis.chunks) > 3
    assert {c.symbol for c in analysis.chunks} == {"big"}
    assert all(c.context == "def big(value_0):" for c in analysis.chunks[1:])


def test_non_ascii_before_a_function_does_not_shift_chunks() -> None:
    data = "# héllo wörld — ✓\nX = 'ü'\n\n\ndef f():\n    return 1\n".encode()
    analysis = analyze("u.py", data, max_tokens=16, count_tokens=COUNT)
    chunk = next(c for c in analysis.chunks if c.symbol == "f")
    assert data[chunk.start_byte : chunk.end_byte].startswith(b"def f():")
    assert chunk.start_line == 5 and chunk.end_line == 6


# --- JavaScript / TypeScript / TSX ----------------------------------------------------

TSX = '''
    import React, { useState } from "react";
    import type { Props } from "./types";

    export const MAX_ITEMS = 10;

    /** The main app. */
    export default function App({ items }: Props) {
      const [open, setOpen] = useState(false);
      return <div onClick={() => setOpen(!open)}>{items.length} items in the list</div>;
    }

    // A button component.
    export const Button: React.FC<Props> = ({ label, onClick, disabled }) => {
      return <button onClick={onClick} disabled={disabled}>{label}</button>;
    };

    const handler = async (event: Event) => { await save(event.target, { retry: true }); };

    @Component({ selector: "store" })
    export class Store<T> extends Base implements Saver {
      private items: T[] = [];
      constructor(private api: Api) { super(); }
      /** Adds one. */
      add(item: T): void { this.items.push(item); this.api.post(item); }
      handle = (x: number) => x + 1;
    }

    export interface Saver { save(): Promise<void>; }
'''


def test_tsx_components_and_arrow_functions() -> None:
    analysis = run("web/src/components/App.tsx", TSX, max_tokens=64)
    assert analysis.language == "tsx"
    app = chunk_with(analysis, "function App")
    assert app.symbol == "App" and "/** The main app. */" in app.text
    assert chunk_with(analysis, "React.FC<Props>").symbol == "Button"
    assert "// A button component." in chunk_with(analysis, "React.FC<Props>").text
    assert chunk_with(analysis, "const handler").symbol == "handler"
    assert "MAX_ITEMS" in chunk_with(analysis, "MAX_ITEMS = 10").symbol
    add = chunk_with(analysis, "add(item: T)")
    assert "Store.add" in add.symbol.split(", ")
    assert add.context == "class Store<T> extends Base implements Saver"
    assert '@Component({ selector: "store" })' in chunk_with(analysis, "export class Store").text


def test_typescript_graph() -> None:
    analysis = run("web/src/components/App.tsx", TSX)
    found = defs(analysis)
    assert found["App"] == ("function", "") and found["handler"] == ("function", "")
    assert found["Store.add"] == ("method", "Store") and found["Store.handle"][1] == "Store"
    assert {("", "react"), ("", "./types")} <= refs(analysis, "import")
    assert {("Store", "Base"), ("Store", "Saver")} <= refs(analysis, "inherit")
    assert {("App", "useState"), ("Store.add", "this.api.post"), ("handler", "save")} <= refs(
        analysis, "call")


def test_javascript_default_exports_and_requires() -> None:
    analysis = run("lib/index.js", '''
        const fs = require("fs");
        export default () => fs.readFileSync("x");
        module.exports.helper = function () { return 1; };
        class Counter { #count = 0; increment() { this.#count++; } }
    ''')
    assert analysis.language == "javascript"
    assert ("", "fs") in refs(analysis, "import")
    names = defs(analysis)
    assert "module.exports.helper" in names and "Counter.increment" in names
    assert any("default" in c.symbol.split(", ") for c in analysis.chunks)


# --- Go, Rust, Java -------------------------------------------------------------------

GO = '''
    // Package main does things.
    package main

    import (
    	"fmt"
    	"os"
    )

    const (
    	MaxSize = 100
    	minSize = 1
    )

    // Server serves.
    type Server struct {
    	Base
    	*Logger
    	name string
    }

    // Run runs the server.
    func (s *Server) Run(addr string) error {
    	fmt.Println("listening on", addr, s.name)
    	return s.listen(addr)
    }

    func main() {
    	s := &Server{name: "x"}
    	if err := s.Run(":80"); err != nil {
    		os.Exit(1)
    	}
    }
'''


def test_go_methods_types_and_constants() -> None:
    analysis = run("cmd/server/main.go", GO, max_tokens=64)
    run_chunk = chunk_with(analysis, "func (s *Server) Run")
    assert run_chunk.symbol == "Server.Run" and run_chunk.kind == "method"
    assert "// Run runs the server." in run_chunk.text
    assert chunk_with(analysis, "type Server struct").symbol == "Server"
    assert "MaxSize" in chunk_with(analysis, "MaxSize = 100").symbol
    found = defs(analysis)
    assert found["Server.Run"] == ("method", "Server") and found["Server"][0] == "class"
    assert {("", "fmt"), ("", "os")} <= refs(analysis, "import")
    assert {("Server", "Base"), ("Server", "Logger")} <= refs(analysis, "inherit")
    assert {("Server.Run", "fmt.Println"), ("main", "s.Run")} <= refs(analysis, "call")


RUST = '''
    use std::collections::{HashMap, HashSet};
    use std::fmt;

    pub const MAX: usize = 3;

    /// A point.
    #[derive(Debug, Clone)]
    pub struct Point<T> {
        x: T,
        y: T,
    }

    impl<T: fmt::Display> fmt::Display for Point<T> {
        fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
            write!(f, "({}, {})", self.x, self.y)
        }
    }

    impl Point<f64> {
        /// Makes one.
        pub fn new(x: f64, y: f64) -> Self {
            Point { x, y }
        }

        pub fn norm(&self) -> f64 {
            (self.x * self.x + self.y * self.y).sqrt()
        }
    }

    pub trait Shape: fmt::Debug {
        fn area(&self) -> f64;
    }
'''


def test_rust_impl_blocks() -> None:
    analysis = run("src/geometry/point.rs", RUST, max_tokens=48)
    assert "Point::fmt" in chunk_with(analysis, "fn fmt").symbol.split(", ")
    assert "Point::new" in chunk_with(analysis, "pub fn new").symbol.split(", ")
    assert "/// Makes one." in chunk_with(analysis, "pub fn new").text
    assert "Point::norm" in chunk_with(analysis, "fn norm").symbol.split(", ")
    assert chunk_with(analysis, "fn norm").context == "impl Point<f64>"
    point = chunk_with(analysis, "pub struct Point")
    assert point.symbol == "Point" and "#[derive(Debug, Clone)]" in point.text
    assert "/// A point." in point.text
    found = defs(analysis)
    assert found["<Point as fmt::Display>"] == ("class", "")
    assert found["Point::fmt"] == ("method", "<Point as fmt::Display>")
    assert found["Point::new"] == ("method", "Point")
    assert {("", "std::collections::HashMap"), ("", "std::fmt")} <= refs(analysis, "import")
    assert {("Point", "fmt::Display"), ("Shape", "fmt::Debug")} <= refs(analysis, "inherit")
    assert ("Point::fmt", "write!") in refs(analysis, "call")


JAVA = '''
    package com.example;

    import java.util.List;

    /** Does foo. */
    @Entity
    public class Foo<T> extends Bar implements Baz, Qux {
        private static final int MAX = 10;
        private final List<T> items;

        /** Builds it. */
        public Foo(List<T> items) { this.items = items; }

        @Override
        public void run() {
            helper(items);
            this.items.forEach(System.out::println);
            new Thread(() -> {}).start();
        }
    }
'''


def test_java_annotations_and_javadoc_stay_attached() -> None:
    analysis = run("src/main/java/com/example/Foo.java", JAVA, max_tokens=48)
    run_chunk = chunk_with(analysis, "public void run()")
    assert "Foo.run" in run_chunk.symbol.split(", ") and "@Override" in run_chunk.text
    assert run_chunk.context == "public class Foo<T> extends Bar implements Baz, Qux"
    ctor = chunk_with(analysis, "public Foo(List<T> items)")
    assert "/** Builds it. */" in ctor.text and "Foo.Foo" in ctor.symbol.split(", ")
    head = chunk_with(analysis, "/** Does foo. */")
    assert "@Entity" in head.text and head.symbol.split(", ")[0] == "Foo"
    assert {("Foo", "Bar"), ("Foo", "Baz"), ("Foo", "Qux")} <= refs(analysis, "inherit")
    assert ("", "java.util.List") in refs(analysis, "import")
    assert {("Foo.run", "helper"), ("Foo.run", "Thread")} <= refs(analysis, "call")


# --- C, C++ -----------------------------------------------------------------------------

CPP_HEADER = '''
    #pragma once
    #include <vector>

    namespace geo {

    /// A shape.
    template <typename T>
    class Shape : public Base<T> {
     public:
      virtual double area() const { return compute(width_, height_) * scale(); }
     private:
      T width_;
    };

    double Shape<int>::perimeter() const { return 2 * (width_ + height_); }

    }  // namespace geo
'''


def test_cpp_header_detection_and_names() -> None:
    assert language_for("geo/shape.h", textwrap.dedent(CPP_HEADER).encode()) == "cpp"
    assert language_for("lib/plain.h", b"int add(int a, int b);\nstruct s { int x; };\n") == "c"
    analysis = run("geo/shape.h", CPP_HEADER, max_tokens=40)
    assert analysis.language == "cpp"
    assert "Shape::area" in chunk_with(analysis, "virtual double area").symbol.split(", ")
    assert chunk_with(analysis, "::perimeter").symbol == "Shape::perimeter"
    found = defs(analysis)
    assert found["Shape"] == ("class", "geo") and found["Shape::area"] == ("method", "Shape")
    assert ("Shape", "Base<T>") in refs(analysis, "inherit")
    assert ("", "vector") in refs(analysis, "import")


def test_c_functions_typedefs_and_macros() -> None:
    analysis = run("src/util.c", '''
        #include <stdio.h>
        #define BUF 128

        /* Adds. */
        int add(int a, int b) {
            return a + b;
        }

        typedef struct {
            int x;
        } point_t;

        static char *dup(const char *s) { return strdup(s); }
    ''', max_tokens=24)
    assert chunk_with(analysis, "int add").symbol == "add"
    assert "/* Adds. */" in chunk_with(analysis, "int add").text
    assert "point_t" in chunk_with(analysis, "typedef struct").symbol
    assert "dup" in chunk_with(analysis, "strdup").symbol
    assert ("dup", "strdup") in refs(analysis, "call")


# --- C#, Kotlin, PHP, Ruby (best effort) ----------------------------------------------

@pytest.mark.parametrize(("path", "source", "expected"), [
    ("Svc.cs", '''
        using System.Text;
        namespace App.Services {
            public class Svc : BaseSvc {
                public void Run() { Helper(); }
            }
        }
    ''', {"Svc": ("class", "App.Services"), "Svc.Run": ("method", "Svc")}),
    ("Main.kt", '''
        import kotlin.math.max
        class User(val name: String) : Base() {
            fun greet(): String = "hi $name"
        }
        fun top(a: Int): Int { return max(a, 1) }
    ''', {"User": ("class", ""), "User.greet": ("method", "User"), "top": ("function", "")}),
    ("svc.php", '''
        <?php
        use Foo\\Bar;
        class Svc extends Base {
            public function run() { helper(); }
        }
        function top($a) { return $a; }
    ''', {"Svc": ("class", ""), "Svc.run": ("method", "Svc"), "top": ("function", "")}),
    ("svc.rb", '''
        require 'json'
        class Svc < Base
          def run(a)
            helper(a)
          end
          def self.make; end
        end
    ''', {"Svc": ("class", ""), "Svc.run": ("method", "Svc"), "Svc.make": ("method", "Svc")}),
])
def test_other_languages_definitions(path: str, source: str,
                                     expected: dict[str, tuple[str, str]]) -> None:
    analysis = run(path, source)
    found = defs(analysis)
    for name, value in expected.items():
        assert found[name] == value, (name, found)
    assert any(kind == "inherit" for kind, *_ in ((r.kind,) for r in analysis.references))



def test_kotlin_grammar_wheel_names_imports_and_members() -> None:
    """tree-sitter-kotlin 1.x: ``import`` nodes, named fields, ``block_comment``."""
    analysis = run("Main.kt", '''
        package app.core

        import kotlin.math.max
        import foo.bar.* // all of it
        import x.y.Z as W

        /** A user. */
        class User(val name: String) : Base(), Iface {
            constructor(x: Int) : this("a")
            companion object Factory {
                fun make() = User("x").greet()
            }
        }

        typealias Id = String
    ''', max_tokens=40)
    assert refs(analysis, "import") == {("", "kotlin.math.max"), ("", "foo.bar"), ("", "x.y.Z")}
    assert chunk_with(analysis, "import kotlin").symbol == "<imports>"
    assert "/** A user. */" in chunk_with(analysis, "class User").text
    assert defs(analysis)["User.constructor"] == ("method", "User")
    assert defs(analysis)["User.Factory.make"] == ("method", "User.Factory")
    assert defs(analysis)["Id"] == ("class", "")
    assert {("User", "Base"), ("User", "Iface")} <= refs(analysis, "inherit")


def test_python_assignments_in_a_block_are_labelled_as_before_the_wrapper() -> None:
    """tree-sitter-python 0.25 wraps assignments in ``expression_statement``: a module-level
    block is still labelled level by level in source order, down to the same depth."""
    analysis = run("cli.py", '''
        import os

        if __name__ == "__main__":
            parser = make_parser()
            if parser.ok:
                args = parser.parse_args()
            class Local:
                pass
    ''', max_tokens=40)
    assert chunk_with(analysis, "if __name__").symbol == "parser, Local, args"

# --- Markdown, rst, INI/TOML, plain text ----------------------------------------------

MARKDOWN = '''
    Intro paragraph.

    # Guide

    Some text about the guide.

    ## Install

    ```sh
    # not a heading
    pip install gitrag
    ```

    Setext Title
    ------------

    More text.
'''


def test_markdown_splits_at_atx_and_setext_headings() -> None:
    analysis = run("docs/guide.md", MARKDOWN, max_tokens=24)
    assert [c.kind for c in analysis.chunks] == ["section"] * len(analysis.chunks)
    install = chunk_with(analysis, "pip install gitrag")
    assert install.symbol == "Install" and install.context == "# Guide"
    assert "# not a heading" in install.text
    assert chunk_with(analysis, "More text.").symbol == "Setext Title"


def test_rst_and_ini_sections() -> None:
    rst = run("docs/index.rst", '''
        =====
        Title
        =====

        Intro.

        Section A
        ---------

        Text A.
    ''', max_tokens=16)
    assert chunk_with(rst, "Text A.").symbol == "Section A"
    assert chunk_with(rst, "Text A.").context == "Title"
    toml = run("pyproject.toml", '''
        [project]
        name = "gitrag"
        version = "0.1.0"

        [tool.pytest.ini_options]
        testpaths = ["tests"]
    ''', max_tokens=16)
    assert chunk_with(toml, "testpaths").symbol == "tool.pytest.ini_options"


def test_plain_text_line_windows() -> None:
    text = "\n".join(f"line {i} of the log" for i in range(200)) + "\n"
    analysis = run("logs/output.txt", text, max_tokens=4096)
    assert analysis.language == "text"
    assert {c.kind for c in analysis.chunks} == {"window"}
    assert all(40 <= c.end_line - c.start_line + 1 <= 60 for c in analysis.chunks[:-1])
    assert all("line" not in c.symbol for c in analysis.chunks)  # no line numbers in names


# --- embedding text -----------------------------------------------------------------

def test_embedding_text_header_and_normalisation() -> None:
    analysis = run("gitrag/services/daemon/server.py", '''
        class Server:
            def handle(self):


                return   1    

            def serve_forever(self, poll_interval=0.5):
                while not self.shutdown_requested and not self.closed:
                    self.handle_request(timeout=poll_interval, retries=self.retries)
                    self.service_actions(poll_interval, self.counters, self.queue)
    ''', max_tokens=64)
    serve = chunk_with(analysis, "def serve_forever")
    assert serve.text.splitlines()[:3] == [
        "Server.serve_forever", "class Server:",
        "def serve_forever(self, poll_interval=0.5):"]  # common indentation removed
    handle = chunk_with(analysis, "def handle")
    assert handle.text.endswith("class Server:\n    def handle(self):\n\n        return   1")
    short = run("a/b.py", "x = 1\n")
    assert short.chunks[0].text == "x\nx = 1"
    assert abbreviate_path("gitrag/services/daemon/server.py") == "gitrag/…/daemon/server.py"


def test_renamed_file_keeps_its_chunk_hashes() -> None:
    source = "def f(a):\n    return a + 1\n\nLIMIT = 3\n"
    before = analyze("pkg/old_name.py", source.encode(), count_tokens=COUNT)
    after = analyze("lib/deeper/new_name.py", source.encode(), count_tokens=COUNT)
    assert [c.hash for c in before.chunks] == [c.hash for c in after.chunks]


def test_hash_survives_moving_the_code_down() -> None:
    body = "def f(a):\n" + "    a = [a + 1 for a in range(a) if a % 3] + [b * 2 for b in a]\n" * 3
    first = analyze("m.py", body.encode(), count_tokens=COUNT)
    before = "def g(items):\n    return [item.name for item in items if item.visible and item.size > 10]\n\n\n"
    before *= 2
    moved = analyze("m.py", (before + body).encode(), count_tokens=COUNT)
    f1 = next(c for c in first.chunks if c.symbol == "f")
    f2 = next(c for c in moved.chunks if c.symbol == "f")
    assert f1.start_line != f2.start_line and f1.hash == f2.hash
    again = analyze("m.py", body.encode(), count_tokens=COUNT)
    assert [c.text for c in again.chunks] == [c.text for c in first.chunks]


# --- detection and fallbacks ----------------------------------------------------------

@pytest.mark.parametrize(("path", "data", "language"), [
    ("a.py", b"", "python"), ("a.pyi", b"", "python"), ("x.mjs", b"", "javascript"),
    ("x.jsx", b"", "javascript"), ("x.ts", b"", "typescript"), ("x.tsx", b"", "tsx"),
    ("x.go", b"", "go"), ("x.rs", b"", "rust"), ("X.java", b"", "java"), ("x.kt", b"", "kotlin"),
    ("x.c", b"", "c"), ("x.cpp", b"", "cpp"), ("x.hpp", b"", "cpp"), ("x.cs", b"", "csharp"),
    ("x.php", b"", "php"), ("x.rb", b"", "ruby"), ("Rakefile", b"", "ruby"),
    ("README.md", b"", "markdown"), ("doc.rst", b"", "rst"), ("pyproject.toml", b"", "ini"),
    ("setup.cfg", b"", "ini"), ("LICENSE", b"MIT", "text"),
    ("bin/tool", b"#!/usr/bin/env python3\nprint(1)\n", "python"),
    ("bin/run", b"#!/usr/bin/env node\n", "javascript"), ("blob.bin", b"\x00\x01\x02", None),
])
def test_language_for(path: str, data: bytes, language: str | None) -> None:
    assert language_for(path, data) == language


def test_minified_file_goes_to_byte_windows() -> None:
    data = b"var a=1;" + b"function f(x){return x+1};" * 2000
    analysis = analyze("dist/app.min.js", data, max_tokens=128, count_tokens=COUNT)
    assert analysis.fallback_reason.startswith("line longer than")
    assert b"".join(data[c.start_byte : c.end_byte] for c in analysis.chunks) == data
    assert all(COUNT(c.text) <= 128 for c in analysis.chunks)


def test_syntax_errors_still_chunk() -> None:
    analysis = run("broken.py", '''
        def ok():
            return 1

        def broken(:
            ((((

        class Fine:
            pass
    ''')
    assert analysis.error_bytes > 0
    assert "ok" in chunk_with(analysis, "def ok").symbol.split(", ")


def test_count_tokens_failure_never_raises() -> None:
    def explode(text: str) -> int:
        raise RuntimeError("tokenizer down")

    analysis = analyze("a.py", b"def f():\n    return 1\n", count_tokens=explode)
    assert analysis.fallback_reason.startswith("internal error")
    assert b"".join(b"def f():\n    return 1\n"[c.start_byte : c.end_byte]
                    for c in analysis.chunks) == b"def f():\n    return 1\n"
