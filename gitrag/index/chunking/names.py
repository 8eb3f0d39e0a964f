"""Definitions and names read from syntax nodes.

:func:`describe` says whether a node defines something (a function, a class-like
container, a type, a namespace) and under which qualified name; :func:`labels` names a
stretch of module-level code by what it declares (``CHUNK_OVERLAP``, ``<imports>``).
Everything here is bounded: no recursion, at most a few dozen nodes visited per call.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gitrag.index.chunking.languages import LangSpec
from gitrag.index.chunking.text import one_line

Node = Any  # tree_sitter.Node

_FUNC_VALUES = frozenset({"arrow_function", "function_expression", "function",
                          "generator_function"})
_CLASS_VALUES = frozenset({"class"})
_IDENTS = frozenset({
    "identifier", "field_identifier", "type_identifier", "property_identifier",
    "private_property_identifier", "qualified_identifier", "operator_name", "destructor_name",
    "namespace_identifier", "constant", "name", "simple_identifier", "scoped_identifier",
    "scope_resolution", "variable_name", "qualified_name", "scoped_type_identifier",
    "template_function", "field_expression", "nested_type_identifier", "dotted_name",
})
_BODY_TYPES = frozenset({"class_body", "function_body", "enum_class_body", "body_statement"})
MAX_NAME = 200
_MODULE_LIKE = frozenset({"mod_item", "module", "internal_module"})  # members are functions


@dataclass(frozen=True)
class DefInfo:
    """A definition node: ``name`` is qualified; ``members`` is the prefix its members get
    (``None`` for functions: their insides stay with them, unnamed)."""

    name: str
    kind: str  # "function" | "method" (Go, receiver known) | "class" | "module" (namespace)
    core: Node
    body: Node | None
    members: str | None
    member_kind: str  # kind of functions directly inside ("method" or "function")
    sig_start: int
    sig_end: int


def text_of(node: Node, data: bytes) -> str:
    """The source of ``node`` decoded from the file's bytes (errors replaced)."""
    return data[node.start_byte : node.end_byte].decode("utf-8", "replace")


def qualify(prefix: str, name: str, sep: str) -> str:
    return f"{prefix}{sep}{name}" if prefix else name


def describe(node: Node, spec: LangSpec, data: bytes, prefix: str = "") -> DefInfo | None:
    """The definition ``node`` makes (through decorators/export/template wrappers), or None."""
    core, default = _unwrap(node, spec)
    if core is None:
        return None
    t = core.type
    if t in spec.special:
        return _special(core, node, spec, data, prefix)
    if default and t in _FUNC_VALUES:
        return _make("default", "function", core, _field(core, "body"), None, node, "function")
    if t in spec.functions:
        name = _function_name(core, spec, data)
        body = _field(core, "body") or _child_of(core, _BODY_TYPES)
        return _def(name, prefix, spec, core, body, None, node) if name else None
    if t in spec.containers or t in spec.types:
        return _container(core, node, spec, data, prefix, default)
    if t in spec.namespaces:
        name = _name_text(core, data) or "<namespace>"
        body = _field(core, "body") or _child_of(core, frozenset({"declaration_list"}))
        return _make(name, "module", core, body, prefix, node, "function")
    return None


def _def(name: str, prefix: str, spec: LangSpec, core: Node, body: Node | None,
         members: str | None, outer: Node, kind: str = "function") -> DefInfo:
    inner = "method" if members is not None else "function"
    if _already_qualified(core, spec):
        return _make(name, "method", core, body, members, outer, inner)
    return _make(qualify(prefix, name, spec.sep), kind, core, body, members, outer, inner)


def _make(name: str, kind: str, core: Node, body: Node | None, members: str | None,
          outer: Node, member_kind: str) -> DefInfo:
    start = _after_annotations(core)
    end = body.start_byte if body is not None and body.start_byte > start else -1
    return DefInfo(_clip(name), kind, core, body, members, member_kind, start, end)


_ANNOTATIONS = frozenset({"decorator", "marker_annotation", "annotation", "attribute_list",
                          "attribute_item", "attributes", "comment", "line_comment",
                          "block_comment"})


def _after_annotations(core: Node) -> int:
    """Where a signature starts: after leading decorators, annotations and attributes."""
    start = core.start_byte
    children = core.children
    for _ in range(2):  # the node itself, then a leading ``modifiers`` node
        for child in children:
            if child.type not in _ANNOTATIONS:
                break
            start = child.end_byte
        else:
            return start
        if child.type != "modifiers":
            return max(start, child.start_byte)
        children = child.children
    return start


def _clip(name: str) -> str:
    name = one_line(name, 10 * MAX_NAME)
    return name if len(name) <= MAX_NAME else name[: MAX_NAME - 1] + "…"


def _already_qualified(core: Node, spec: LangSpec) -> bool:
    return spec.name == "go" and core.type == "method_declaration"


def _unwrap(node: Node, spec: LangSpec) -> tuple[Node | None, bool]:
    """Strip wrapper nodes; the flag says the core is an ``export default`` value."""
    core = node
    for _ in range(6):
        if core.type not in spec.wrappers:
            return core, False
        inner = _field(core, "definition") or _field(core, "declaration")
        if inner is None and core.type == "export_statement":
            value = _field(core, "value")
            if value is not None and (value.type in _FUNC_VALUES or value.type in _CLASS_VALUES):
                return value, True
            return None, False
        if inner is None:
            named = [c for c in core.named_children if c.type not in spec.attach]
            inner = named[-1] if named else None
        if inner is None:
            return None, False
        core = inner
    return None, False


def _container(core: Node, outer: Node, spec: LangSpec, data: bytes, prefix: str,
               default: bool) -> DefInfo | None:
    if spec.name == "rust" and core.type == "impl_item":
        return _rust_impl(core, outer, data, prefix)
    # a Kotlin ``typealias`` has no name field: its name is its first identifier
    name = _name_text(core, data) or _first_child_text(
        core, data, ("identifier",) if spec.name == "kotlin" else ("type_identifier",))
    if not name and core.type == "companion_object":
        name = "Companion"
    if not name:
        if not default:
            return None
        name = "default"
    body = _field(core, "body") or _child_of(core, _BODY_TYPES)
    if core.type in ("struct_specifier", "union_specifier", "enum_specifier",
                     "class_specifier") and body is None:
        return None  # a forward declaration or a use of the type
    qname = qualify(prefix, name, spec.sep)
    members = qname if core.type in spec.containers else None
    kind_inside = "function" if core.type in _MODULE_LIKE and spec.name != "ruby" else "method"
    return _make(qname, "class", core, body, members, outer, kind_inside)


def _rust_impl(core: Node, outer: Node, data: bytes, prefix: str) -> DefInfo | None:
    typ = _field(core, "type")
    if typ is None:
        return None
    tname = _strip_generics(text_of(typ, data))
    trait = _field(core, "trait")
    qtype = qualify(prefix, tname, "::")
    name = f"<{qtype} as {_strip_generics(text_of(trait, data))}>" if trait is not None else qtype
    return _make(name, "class", core, _field(core, "body"), qtype, outer, "method")


def _strip_generics(text: str) -> str:
    text = text.lstrip("&*").strip()
    if text.startswith("mut "):
        text = text[4:]
    cut = text.find("<")
    return one_line(text[:cut] if cut > 0 else text, MAX_NAME)


def _function_name(core: Node, spec: LangSpec, data: bytes) -> str | None:
    lang = spec.name
    if lang in ("c", "cpp") and core.type == "function_definition":
        return declarator_name(_field(core, "declarator"), data)
    if lang == "go" and core.type == "method_declaration":
        return _go_method_name(core, data)
    if lang == "kotlin":
        if core.type == "secondary_constructor":
            return "constructor"
        return _name_text(core, data)
    if lang == "ruby" and core.type == "singleton_method":
        name = _name_text(core, data)
        obj = _field(core, "object")
        return f"{text_of(obj, data)}.{name}" if obj is not None and obj.type != "self" else name
    if core.type == "macro_definition":
        name = _name_text(core, data)
        return f"{name}!" if name else None
    return _name_text(core, data)


def _go_method_name(core: Node, data: bytes) -> str | None:
    name = _name_text(core, data)
    recv = _field(core, "receiver")
    typ = None
    if recv is not None:
        for param in recv.named_children:
            typ = _field(param, "type")
            if typ is not None:
                break
    if typ is None:
        return name
    return f"{_strip_generics(text_of(typ, data))}.{name}"


def _first_child_text(core: Node, data: bytes, types: tuple[str, ...]) -> str | None:
    for child in core.named_children:
        if child.type in types:
            return text_of(child, data)
    return None


def declarator_name(node: Node | None, data: bytes) -> str | None:
    """Follow a C/C++ declarator chain (pointer, function, array...) down to its name."""
    for _ in range(16):
        if node is None:
            return None
        if node.type in _IDENTS:
            return _strip_template_args(one_line(text_of(node, data), MAX_NAME))
        inner = _field(node, "declarator")
        if inner is None:
            named = [c for c in node.named_children if c.type in _IDENTS]
            return one_line(text_of(named[0], data), MAX_NAME) if named else None
        node = inner
    return None


def _strip_template_args(name: str) -> str:
    """``Shape<int>::area`` -> ``Shape::area`` (``operator<`` is left alone)."""
    if "<" not in name or "operator" in name:
        return name
    for _ in range(8):
        stripped = _TEMPLATE_ARGS.sub("", name)
        if stripped == name:
            break
        name = stripped
    return name


_TEMPLATE_ARGS = re.compile(r"<[^<>]*>")


def _name_text(node: Node, data: bytes) -> str | None:
    name = _field(node, "name")
    if name is None:
        return None
    text = text_of(name, data)
    if name.type == "string":
        text = text.strip("'\"`")
    return one_line(text, MAX_NAME) or None


def _field(node: Node, name: str) -> Node | None:
    return node.child_by_field_name(name)


def _child_of(node: Node, types: frozenset[str]) -> Node | None:
    for child in node.named_children:
        if child.type in types:
            return child
    return None


def _special(core: Node, outer: Node, spec: LangSpec, data: bytes, prefix: str) -> DefInfo | None:
    t = core.type
    if t in ("lexical_declaration", "variable_declaration"):
        return _js_variable(core, outer, spec, data, prefix)
    if t == "expression_statement":
        return _js_expression(core, outer, spec, data, prefix)
    if t in ("field_definition", "public_field_definition"):
        value = _field(core, "value")
        name_node = _field(core, "property") or _field(core, "name")
        if value is None or name_node is None or value.type not in _FUNC_VALUES:
            return None
        return _def(text_of(name_node, data), prefix, spec, value, _field(value, "body"), None, outer)
    if t == "type_declaration":  # Go
        specs = [c for c in core.named_children if c.type in ("type_spec", "type_alias")]
        if len(specs) != 1 or _field(specs[0], "name") is None:
            return None
        name = text_of(_field(specs[0], "name"), data)
        return _def(name, prefix, spec, core, None, None, outer, "class")
    if t == "type_definition":  # C/C++ typedef of a struct with a body
        typ = _field(core, "type")
        if typ is None or _field(typ, "body") is None:
            return None
        declared = declarator_name(_field(core, "declarator"), data)
        return _def(declared, prefix, spec, core, None, None, outer, "class") if declared else None
    return None


def _js_variable(core: Node, outer: Node, spec: LangSpec, data: bytes,
                 prefix: str) -> DefInfo | None:
    decls = [c for c in core.named_children if c.type == "variable_declarator"]
    if len(decls) != 1:
        return None
    name_node, value = _field(decls[0], "name"), _field(decls[0], "value")
    if name_node is None or value is None or name_node.type != "identifier":
        return None
    name = text_of(name_node, data)
    if value.type in _CLASS_VALUES:
        body = _field(value, "body")
        return _make(qualify(prefix, name, spec.sep), "class", value, body,
                     qualify(prefix, name, spec.sep), outer, "method")
    func = value if value.type in _FUNC_VALUES else _wrapped_function(value)
    if func is None:
        return None
    return _def(name, prefix, spec, core, _field(func, "body"), None, outer)


def _wrapped_function(value: Node) -> Node | None:
    """``React.memo(() => ...)``, ``forwardRef(function (...) {...})``: the inner function."""
    if value.type != "call_expression":
        return None
    args = _field(value, "arguments")
    if args is None:
        return None
    for arg in args.named_children:
        if arg.type in _FUNC_VALUES:
            return arg
    return None


def _js_expression(core: Node, outer: Node, spec: LangSpec, data: bytes,
                   prefix: str) -> DefInfo | None:
    inner = core.named_children[0] if core.named_child_count else None
    if inner is None:
        return None
    if inner.type in ("internal_module", "module"):
        return describe(inner, spec, data, prefix)
    if inner.type == "assignment_expression":
        left, right = _field(inner, "left"), _field(inner, "right")
        if left is not None and right is not None and right.type in _FUNC_VALUES:
            return _def(text_of(left, data), prefix, spec, core, _field(right, "body"), None, outer)
    return None


def signature(info: DefInfo, data: bytes) -> str:
    """The definition's header on one line (up to its body, else its first line)."""
    end = info.sig_end
    if end < 0:
        nl = data.find(b"\n", info.sig_start, info.core.end_byte)
        end = nl if nl >= 0 else info.core.end_byte
    return one_line(data[info.sig_start : end].decode("utf-8", "replace"))
