"""Symbol graph of one file: definitions (with containment) and call/import/inherit facts.

One pass over the whole tree with a ``TreeCursor`` (no recursion). Definitions use the
same naming as the chunks (:func:`names.describe`); nested functions are qualified by
their enclosing function (``outer.inner``). A reference's ``source`` is the innermost
enclosing definition.

Module-level bindings are definitions too (:data:`VARIABLES`): flask's ``g = LocalProxy(...)``
and ``CHUNK_OVERLAP = 10`` are what a question naming ``g`` or ``CHUNK_OVERLAP`` wants.
Only names a module binds for everyone count, never locals or attributes (see
:meth:`_Walk._variables`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gitrag.index.chunking.languages import LangSpec
from gitrag.index.chunking.model import SymbolDef, SymbolRef
from gitrag.index.chunking.names import Node, describe, qualify, text_of
from gitrag.index.chunking.text import one_line

_MAX_TARGET = 120
_JS_CALLS = {"call_expression": "function", "new_expression": "constructor"}
# call node type -> field holding the callee, or "..name" = source from the node start to
# the end of field ``name`` (``this.x.go``, ``$this->go``, ``B::st``)
CALLS: dict[str, dict[str, str]] = {
    "python": {"call": "function"},
    "javascript": _JS_CALLS, "typescript": _JS_CALLS, "tsx": _JS_CALLS,
    "go": {"call_expression": "function"},
    "rust": {"call_expression": "function", "macro_invocation": "macro"},
    "java": {"method_invocation": "..name", "object_creation_expression": "type"},
    "kotlin": {"call_expression": "", "constructor_invocation": ""},
    "c": {"call_expression": "function"},
    "cpp": {"call_expression": "function", "new_expression": "type"},
    "csharp": {"invocation_expression": "function", "object_creation_expression": "type"},
    "php": {"function_call_expression": "function", "member_call_expression": "..name",
            "scoped_call_expression": "..name", "object_creation_expression": ""},
    "ruby": {"call": "..method"},
}
_INHERIT_CLAUSES = frozenset({
    "class_heritage", "extends_type_clause", "superclass", "super_interfaces",
    "extends_interfaces", "delegation_specifier", "base_class_clause", "base_list",
    "base_clause", "class_interface_clause",
})
_RUBY_REQUIRES = frozenset({"require", "require_relative", "load"})
_JS_VARIABLES = {"lexical_declaration": "", "variable_declaration": "variable"}
# module-level binding node type -> kind of the names it defines ("" = by its keyword:
# JS/TS ``const`` is a constant, ``let`` a variable). Python has no constants: an
# UPPER_CASE name is a convention, so every binding is a ``variable``.
VARIABLES: dict[str, dict[str, str]] = {
    "python": {"assignment": "variable"},
    "javascript": _JS_VARIABLES, "typescript": _JS_VARIABLES, "tsx": _JS_VARIABLES,
    "go": {"const_declaration": "constant", "var_declaration": "variable"},
    "rust": {"const_item": "constant", "static_item": "variable"},
}
_JS_TOP = frozenset({"program", "export_statement", "ambient_declaration"})
_PY_PATTERNS = frozenset({"pattern_list", "tuple_pattern", "list_pattern"})
_RUBY_MIXINS = frozenset({"include", "extend", "prepend"})


class _Walk:
    def __init__(self, spec: LangSpec, data: bytes) -> None:
        self.spec, self.data = spec, data
        self.defs: list[SymbolDef] = []
        self.refs: list[SymbolRef] = []
        # (end byte, qualified name, prefix for what is inside, kind of functions inside)
        self.stack: list[tuple[int, str, str, str]] = []
        self.error_bytes = 0
        self._error_end = -1
        self.calls = CALLS.get(spec.name, {})
        self.variables = VARIABLES.get(spec.name, {})
        self.def_types = spec.functions | spec.containers | spec.types | spec.namespaces | spec.special
        self.imports = spec.imports | {"import_spec", "export_statement"}
        self.types = self.def_types | self.imports | set(self.calls) | set(self.variables) | _INHERIT_CLAUSES | {
            "field_declaration", "type_elem", "trait_bounds", "ERROR"}

    def source(self) -> str:
        return self.stack[-1][1] if self.stack else ""

    def ref(self, kind: str, target: str, node: Node, source: str | None = None) -> None:
        target = one_line(target, _MAX_TARGET)
        if target:
            self.refs.append(SymbolRef(kind, self.source() if source is None else source, target,
                                       node.start_point[0] + 1))

    def visit(self, node: Node) -> None:
        start = node.start_byte
        if node.type == "ERROR":
            if start >= self._error_end:
                self.error_bytes += node.end_byte - start
                self._error_end = node.end_byte
            return
        stack = self.stack
        while stack and stack[-1][0] <= start:
            stack.pop()
        t = node.type
        defined = t in self.def_types and self._definition(node)
        if t in self.variables and not defined:
            self._variables(node, self.variables[t])
        if t in self.calls:
            self._call(node, self.calls[t])
        if t in self.imports:
            for target in import_targets(node, self.spec.name, self.data):
                self.ref("import", target, node)
        if t in _INHERIT_CLAUSES or t in ("field_declaration", "type_elem", "trait_bounds"):
            for target in inherit_targets(node, self.spec.name, self.data):
                self.ref("inherit", target, node)

    def _definition(self, node: Node) -> bool:
        """Record the definition ``node`` makes; False when it makes none."""
        prefix, inner_kind = (self.stack[-1][2], self.stack[-1][3]) if self.stack else ("", "function")
        info = describe(node, self.spec, self.data, prefix)
        if info is None or (info.core != node and info.core.type in self.def_types):
            return False  # a wrapper (TS namespace statement): the inner node is visited itself
        kind = inner_kind if info.kind == "function" else info.kind
        end_row, end_col = node.end_point
        end_line = end_row + (1 if end_col or end_row == node.start_point[0] else 0)
        parent = self.source()
        sep = self.spec.sep
        if not parent and sep in info.name and info.kind in ("function", "method"):
            parent, kind = info.name.rsplit(sep, 1)[0], "method"  # Go receiver, C++ Foo::bar
        self.defs.append(SymbolDef(info.name, kind, node.start_point[0] + 1, end_line, parent))
        bases = info.core.child_by_field_name("superclasses")  # Python
        if bases is not None:
            for target in inherit_targets(bases, self.spec.name, self.data):
                self.ref("inherit", target, bases, source=info.name)
        if self.spec.name == "rust" and info.core.type == "impl_item" and info.members:
            trait = info.core.child_by_field_name("trait")
            if trait is not None:
                self.ref("inherit", text_of(trait, self.data), node, source=info.members)
        inside = info.members if info.members is not None else (
            prefix if info.kind == "module" else info.name)
        self.stack.append((node.end_byte, info.name, inside, info.member_kind))
        return True

    def _variables(self, node: Node, kind: str) -> None:
        """Names a module-level binding defines, as ``variable``/``constant`` definitions.

        Python: the targets of an assignment outside every function and class (module-level
        ``if``/``try`` bodies included: they bind module globals), each name of ``A = B = ...``
        and of a tuple target ``a, b = ...`` (each is bound as surely as a single name);
        never attributes or subscripts (``obj.x = ``, ``d[k] = ``: they change an object,
        they define no name), nor ``_`` and dunders (``__all__``, ``__version__``: module
        metadata every package sets, not what a question means by the name). JS/TS: the
        plain-name declarators of a top-level ``const/let/var`` (also exported or
        ``declare``d), not destructuring (``const {a} = require(...)`` is an import). Go:
        top-level ``const``/``var``. Rust: ``const``/``static`` at the top, in a ``mod``, or
        associated in an ``impl``/``trait`` (qualified ``Type::NAME``)."""
        lang, parent = self.spec.name, node.parent
        if parent is None:
            return
        names: list[Any] = []
        prefix = ""
        if lang == "python":
            if self.stack or parent.type not in ("expression_statement", "assignment"):
                return
            left = node.child_by_field_name("left")
            if left is not None:
                names = [c for c in left.named_children if c.type == "identifier"] \
                    if left.type in _PY_PATTERNS else [left] if left.type == "identifier" else []
        elif lang in ("javascript", "typescript", "tsx"):
            if parent.type not in _JS_TOP or (parent.type != "program" and (
                    parent.parent is None or parent.parent.type != "program")):
                return
            if not kind:
                kind = "constant" if node.children and node.children[0].type == "const" else "variable"
            decls = [c.child_by_field_name("name") for c in node.named_children if c.type == "variable_declarator"]
            names = [n for n in decls if n is not None and n.type == "identifier"]
        elif lang == "go":
            if parent.type != "source_file":
                return
            specs = [c for c in node.named_children if c.type in ("const_spec", "var_spec")]
            for lst in (c for c in node.named_children if c.type == "var_spec_list"):
                specs += [c for c in lst.named_children if c.type == "var_spec"]
            names = [(n, spec) for spec in specs for n in spec.children_by_field_name("name")]
        elif lang == "rust":
            inside = parent.type == "declaration_list" and parent.parent is not None and \
                parent.parent.type in ("mod_item", "impl_item", "trait_item")
            if parent.type != "source_file" and not inside:
                return
            prefix = self.stack[-1][2] if inside and self.stack else ""
            name = node.child_by_field_name("name")
            names = [name] if name is not None else []
        for item in names:  # a name node, or (name, the Go spec it has its own lines in)
            name_node, span = item if isinstance(item, tuple) else (item, node)
            name = text_of(name_node, self.data)
            if name == "_" or (name.startswith("__") and name.endswith("__")):
                continue
            end_row, end_col = span.end_point
            end_line = end_row + (1 if end_col or end_row == span.start_point[0] else 0)
            self.defs.append(SymbolDef(qualify(prefix, name, self.spec.sep), kind, span.start_point[0] + 1,
                                       end_line, self.source() if prefix else ""))

    def _call(self, node: Node, rule: str) -> None:
        callee = callee_text(node, rule, self.data)
        if not callee:
            return
        lang = self.spec.name
        if lang == "ruby" and callee in _RUBY_REQUIRES | _RUBY_MIXINS:
            kind = "import" if callee in _RUBY_REQUIRES else "inherit"
            args = node.child_by_field_name("arguments")
            for arg in args.named_children if args is not None else []:
                self.ref(kind, text_of(arg, self.data).strip("'\":"), node)
            return
        if callee in ("require", "import") and lang in ("javascript", "typescript", "tsx"):
            args = node.child_by_field_name("arguments")
            first = args.named_children[0] if args is not None and args.named_child_count else None
            if first is not None and first.type == "string":
                self.ref("import", text_of(first, self.data).strip("'\"`"), node)
                return
        self.ref("call", callee + "!" if node.type == "macro_invocation" else callee, node)


def callee_text(node: Node, rule: str, data: bytes) -> str:
    """The called name as written (``os.path.join``, ``self.run``, ``Vec::new``)."""
    if rule.startswith(".."):
        name = node.child_by_field_name(rule[2:])
        if name is None:
            return ""
        text = data[node.start_byte : name.end_byte].decode("utf-8", "replace")
    else:
        target = node.child_by_field_name(rule) if rule else (
            node.named_children[0] if node.named_child_count else None)
        if target is None:
            return ""
        text = text_of(target, data)
    text = one_line(text, 10_000)
    if len(text) > 80 or "(" in text or "\n" in text:
        for sep in (".", "->", "::"):
            text = text.rsplit(sep, 1)[-1]
        text = text if text.replace("_", "").isalnum() else ""
    return text


def _unquote(text: str) -> str:
    return text.strip().strip("'\"`<>")


def import_targets(node: Node, lang: str, data: bytes) -> list[str]:
    """Modules/names an import statement brings in, as written."""
    t = node.type
    if lang == "python":
        return _python_imports(node, data)
    if t in ("import_statement", "export_statement"):
        src = node.child_by_field_name("source")
        return [_unquote(text_of(src, data))] if src is not None else []
    if lang == "go":
        path = node.child_by_field_name("path") if t == "import_spec" else None
        return [_unquote(text_of(path, data))] if path is not None else []
    if t == "import_spec":
        path = node.child_by_field_name("path")
        return [_unquote(text_of(path, data))] if path is not None else []
    if t == "use_declaration":
        arg = node.child_by_field_name("argument")
        return _expand_braces(text_of(arg, data)) if arg is not None else []
    if lang == "kotlin" and t == "import":  # the path, without ``.*`` or ``as`` alias
        path = next((c for c in node.named_children if c.type == "qualified_identifier"), None)
        return [text_of(path, data)] if path is not None else []
    if t == "preproc_include":
        path = node.child_by_field_name("path")
        return [_unquote(text_of(path, data))] if path is not None else []
    if t in ("import_declaration", "using_directive", "namespace_use_declaration",
             "extern_crate_declaration", "using_declaration"):
        text = one_line(text_of(node, data), 400)
        for word in ("import ", "static ", "using ", "use ", "extern crate ", "global ", "function ", "const "):
            text = text.replace(word, "", 1) if text.startswith(word) else text
        text = text.rstrip(";")
        if "{" in text:
            return _expand_braces(text)
        return [p.strip() for p in text.split(",") if p.strip()]
    return []


def _python_imports(node: Node, data: bytes) -> list[str]:
    t = node.type
    if t not in ("import_statement", "import_from_statement"):
        return []
    names = [c.child_by_field_name("name") or c for c in node.children_by_field_name("name")]
    texts = [text_of(n, data) for n in names]
    if t == "import_statement":
        return texts
    module = node.child_by_field_name("module_name")
    base = text_of(module, data) if module is not None else ""
    if not texts:
        return [f"{base}.*" if not base.endswith(".") else f"{base}*"]
    return [base + t if base.endswith(".") else f"{base}.{t}" for t in texts]


def _expand_braces(text: str) -> list[str]:
    """``a::{B, C}`` -> ``a::B``, ``a::C`` (one level; Rust ``use``, PHP group ``use``)."""
    text = "".join(text.split())
    if "{" not in text or not text.endswith("}"):
        return [text]
    base, _, rest = text.partition("{")
    return [base + part for part in rest[:-1].split(",") if part and "{" not in part] or [text]


def inherit_targets(node: Node, lang: str, data: bytes) -> list[str]:
    """Base classes/interfaces/embedded types named by an inheritance clause."""
    t = node.type
    if t == "field_declaration":  # Go embedded struct field
        if lang != "go" or node.child_by_field_name("name") is not None:
            return []
        typ = node.child_by_field_name("type")
        return [text_of(typ, data).lstrip("*")] if typ is not None else []
    if t == "type_elem":
        return [text_of(node, data)] if lang == "go" else []
    if t == "trait_bounds":
        parent = node.parent
        if lang != "rust" or parent is None or parent.type != "trait_item":
            return []
    out: list[str] = []
    for child in node.named_children:
        if child.type in ("access_specifier", "keyword_argument", "comment", "argument_list",
                          "value_arguments", "arguments"):
            continue
        if child.type in ("extends_clause", "implements_clause", "type_list"):
            out.extend(text_of(c, data) for c in child.named_children if c.type != "type_arguments")
        elif child.type == "constructor_invocation":
            out.append(text_of(child.named_children[0], data))
        else:
            out.append(text_of(child, data))
    return out


@dataclass
class Graph:
    """What :func:`extract` finds: definitions, references, bytes in ERROR regions."""

    definitions: list[SymbolDef]
    references: list[SymbolRef]
    error_bytes: int


_queries: dict[str, Any] = {}


def _query(spec: LangSpec, types: set[str]) -> Any:
    """One cached query capturing every node of ``types`` that the grammar knows."""
    query = _queries.get(spec.name)
    if query is None:
        from tree_sitter import Query

        from gitrag.index.chunking.treesitter import get_language

        language = get_language(spec.name)
        known = sorted(t for t in types if language.id_for_node_kind(t, True) is not None)
        query = _queries[spec.name] = Query(language, "[{}] @n".format(" ".join(f"({t})" for t in known)))
    return query


def extract(tree: Any, spec: LangSpec, data: bytes) -> Graph:
    """Definitions and references of a parsed file.

    The interesting nodes are visited in document order, outer nodes before inner ones.
    """
    walk = _Walk(spec, data)
    for node in _interesting(tree, spec, walk.types):
        walk.visit(node)
    return Graph(walk.defs, walk.refs, walk.error_bytes)


def _interesting(tree: Any, spec: LangSpec, types: set[str]) -> list[Node]:
    """Nodes of ``types``: found by tree-sitter's query engine (C speed, linear) for a
    clean tree; by a linear cursor walk when the tree has errors, where queries go
    superlinear on wide ERROR nodes (2 s for 200 KB). No query progress callback: in
    py-tree-sitter 0.26.1 ``QueryCursor.captures(progress_callback=...)`` segfaults."""
    root = tree.root_node
    if root.has_error:
        return _walk_tree(tree, types)
    from tree_sitter import QueryCursor

    found = QueryCursor(_query(spec, types)).captures(root).get("n", [])
    found.sort(key=lambda n: (n.start_byte, -n.end_byte))
    return found


def _walk_tree(tree: Any, types: set[str], limit: int = 5_000_000) -> list[Node]:
    """Pre-order walk with a ``TreeCursor`` (no recursion), at most ``limit`` nodes."""
    found: list[Node] = []
    cursor = tree.walk()
    for _ in range(limit):
        node = cursor.node
        if node.type in types:
            found.append(node)
        if cursor.goto_first_child():
            continue
        while not cursor.goto_next_sibling():
            if not cursor.goto_parent():
                return found
    return found
