"""Names for code that is not itself a definition: what a statement declares.

``CHUNK_OVERLAP = 10`` is labelled ``CHUNK_OVERLAP``; ``import os`` is ``<imports>``; a
module-level ``if``/``try`` is labelled by the definitions and assignments inside it.
"""

from __future__ import annotations

from collections import deque

from gitrag.index.chunking.languages import LangSpec
from gitrag.index.chunking.names import MAX_NAME, Node, declarator_name, describe, qualify, text_of
from gitrag.index.chunking.text import one_line

MAX_LABELS = 8
_MAX_VISITS = 48
_MAX_DEPTH = 4

# declaration node type -> field holding the declared name(s)
_DECL_FIELDS = {
    "assignment": "left", "type_alias_statement": "left", "assignment_expression": "left",
    "variable_declarator": "name", "const_spec": "name", "var_spec": "name",
    "type_spec": "name", "type_alias": "name", "const_item": "name", "static_item": "name",
    "type_item": "name", "mod_item": "name", "preproc_def": "name",
    "preproc_function_def": "name", "property_element": "name", "property_declaration": "",
    "declaration": "declarator", "field_declaration": "declarator",
    "type_definition": "declarator", "const_element": "", "variable_declaration": "",
}
_RUBY_REQUIRES = frozenset({"require", "require_relative", "load"})
_PATTERNS = frozenset({"pattern_list", "tuple_pattern", "list_pattern", "expression_list",
                       "object_pattern", "array_pattern"})
_NAMEISH = frozenset({"identifier", "constant", "simple_identifier", "name", "variable_name",
                      "type_identifier", "field_identifier",
                      "shorthand_property_identifier_pattern"})
# subtrees never worth searching for declared names
_SKIP = frozenset({"string", "comment", "argument_list", "arguments", "parameters",
                   "formal_parameters", "block_comment", "line_comment", "template_string"})


def labels(node: Node, spec: LangSpec, data: bytes, prefix: str) -> list[str]:
    """Up to :data:`MAX_LABELS` names declared by ``node`` (breadth-first, bounded)."""
    out: list[str] = []
    queue: deque[tuple[Node, int]] = deque([(node, 0)])
    visits = 0
    while queue and visits < _MAX_VISITS and len(out) < MAX_LABELS:
        current, depth = queue.popleft()
        visits += 1
        found = _names_at(current, spec, data, prefix)
        if found is not None:
            out.extend(n for n in found if n not in out)
            continue
        if depth < _MAX_DEPTH and current.type not in _SKIP:
            queue.extend((child, depth + 1) for child in _children(current, spec))
    return out[:MAX_LABELS]


def _children(node: Node, spec: LangSpec) -> list[Node]:
    """Named children, seeing through a Python ``expression_statement``: tree-sitter-python
    0.25 wraps every assignment in one, which would push the names it declares a level
    deeper (out of the search's depth, and behind shallower definitions)."""
    out: list[Node] = []
    for child in node.named_children:
        if spec.name == "python" and child.type == "expression_statement":
            out.extend(child.named_children)
        else:
            out.append(child)
    return out


def _names_at(node: Node, spec: LangSpec, data: bytes, prefix: str) -> list[str] | None:
    """Names if ``node`` declares something (possibly none), ``None`` to keep searching."""
    t = node.type
    if t in spec.imports:
        return ["<imports>"]
    if t in spec.attach:
        return []
    if t == "call" and spec.name == "ruby":
        method = node.child_by_field_name("method")
        if method is not None and text_of(method, data) in _RUBY_REQUIRES:
            return ["<imports>"]
        return None
    info = describe(node, spec, data, prefix)
    if info is not None:
        return [info.name]
    if t == "export_statement" and node.child_by_field_name("declaration") is None:
        return ["<imports>"] if node.child_by_field_name("source") is not None else ["<exports>"]
    if t not in _DECL_FIELDS:
        return None
    field = _DECL_FIELDS[t]
    targets = node.children_by_field_name(field) if field else []
    if not targets:
        targets = [c for c in node.named_children if c.type in _NAMEISH][:1]
    names: list[str] = []
    for target in targets:
        names.extend(_target_names(target, spec, data))
    if not names and t in ("variable_declaration", "property_declaration"):
        return None  # JS/Kotlin: the names are one level down
    return [qualify(prefix, n, spec.sep) for n in names]


def _target_names(target: Node, spec: LangSpec, data: bytes) -> list[str]:
    if target.type in _PATTERNS:
        return [text_of(c, data) for c in target.named_children if c.type in _NAMEISH]
    if target.type == "type" and target.named_child_count:  # Python ``type X = ...``
        target = target.named_children[0]
    if target.type in _NAMEISH:
        return [one_line(text_of(target, data), MAX_NAME).lstrip("$")]
    if spec.name in ("c", "cpp"):
        name = declarator_name(target, data)
        return [name] if name else []
    return []
