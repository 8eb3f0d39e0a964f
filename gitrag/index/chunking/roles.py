"""Which parts of a source file declare rather than implement: command-line option
declarations and test code inside implementation files, as byte ranges of the parse tree.

Two roles, each marked by the syntax of the language's common convention, not by any one
repository:

- ``decl``: argument-parser and option declarations. A file defining a command-line
  interface spends most of its lines naming options (``@click.option(...)``,
  ``parser.add_argument(...)``, clap's ``Arg::new("x").long("x")`` chains and
  ``#[arg(...)]`` fields, cobra/pflag's ``cmd.Flags().StringVarP(...)``, commander/yargs
  ``.option(...)``, picocli's ``@Option``, getopt's ``struct option``). Those chunks repeat
  every option's name and help text, so they match almost any question about a feature,
  while the code doing the work is elsewhere.
- ``test``: test code inside an implementation file, where the language's convention puts
  it there: Rust's ``#[cfg(test)] mod tests`` and ``#[test]``/``#[bench]`` functions
  (``#[tokio::test]`` too), Java methods annotated ``@Test`` outside ``src/test``. Python's
  ``test_*`` and Go's ``TestX`` live in test files by convention, which the path priors
  already mark (a ``test_client`` method in an implementation file is not a test).

:func:`role_ranges` gives, per role, sorted disjoint ``[start, end)`` ranges;
gitrag.index.chunking.prose.prose_shares turns them into each chunk's share, stored in the payload
(``decl``, ``test``) and read by the ranking (gitrag.query.ranking.stages.apply_role_priors). Pure:
no I/O; queries are compiled once per language.
"""

from __future__ import annotations

import re
from typing import Any

ROLES = ("decl", "test")

_JAVA_ANNOTATION = "[(annotation name: (identifier) @n) (marker_annotation name: (identifier) @n)]"
#: Per language, tree-sitter query patterns; each capture is named ``<role>_<rule>`` and is
#: checked by :func:`_keep` (text rules that a query predicate cannot say portably).
_PATTERNS: dict[str, list[str]] = {
    "python": [
        "(decorator (call function: (attribute attribute: (identifier) @n))) @decl_deco",
        "(decorator (call function: (identifier) @n)) @decl_deco",
        "(call function: (attribute attribute: (identifier) @n)) @decl_call",
    ],
    "rust": [
        "(attribute_item) @test_attr",
        "(attribute_item) @decl_attr",
        "(call_expression function: (scoped_identifier path: (identifier) @p name: (identifier) @n)) @decl_clap",
    ],
    "go": [
        "(call_expression function: (selector_expression operand: (_) @p field: (field_identifier) @n)) @decl_flag",
    ],
    "javascript": ["(call_expression function: (member_expression property: (property_identifier) @n)) @decl_js"],
    "typescript": ["(call_expression function: (member_expression property: (property_identifier) @n)) @decl_js"],
    "tsx": ["(call_expression function: (member_expression property: (property_identifier) @n)) @decl_js"],
    "java": [
        f"(field_declaration (modifiers {_JAVA_ANNOTATION})) @decl_javafield",
        f"(method_declaration (modifiers {_JAVA_ANNOTATION})) @test_javamethod",
    ],
    "c": ["(declaration type: (struct_specifier name: (type_identifier) @n)) @decl_getopt"],
    "cpp": ["(declaration type: (struct_specifier name: (type_identifier) @n)) @decl_getopt"],
}

_PY_DECO = frozenset({"option", "argument", "version_option", "help_option", "password_option",
                      "confirmation_option", "Option", "Argument"})
_PY_CALL = frozenset({"add_argument", "add_option", "add_argument_group", "add_mutually_exclusive_group"})
_RUST_TEST = re.compile(r"#\[\s*(?:cfg\s*\(\s*test\s*\)|(?:\w+::)*test|bench)\s*\]")
_RUST_DECL = re.compile(r"#\[\s*(?:arg|clap|command|structopt|value)\b"
                        r"|#\[\s*derive\s*\([^)]*\b(?:Parser|Args|Subcommand|StructOpt)\b")
_RUST_CLAP = frozenset({("Arg", "new"), ("Arg", "with_name"), ("Arg", "from_usage"), ("Arg", "from")})
_GO_FLAG = re.compile(r"^(?:Bool|Int|Int8|Int16|Int32|Int64|Uint|Uint8|Uint16|Uint32|Uint64|Float32|Float64|String|"
                      r"StringSlice|StringArray|StringToString|IntSlice|Duration|DurationSlice|Count|IP|IPSlice|"
                      r"BytesHex|Var|Func|BoolFunc|TextVar)(?:Var)?P?$")
_GO_FLAGSET = re.compile(r"(?:^|\.)(?:Persistent|Local|Inherited|NonInherited)?Flags\(\)$|^p?flag$")
_JS_DECL = frozenset({"option", "requiredOption", "addOption", "argument", "addArgument", "positional"})
_JAVA_DECL = frozenset({"Option", "Parameters", "Parameter", "ArgGroup"})
_JAVA_TEST = frozenset({"Test", "ParameterizedTest", "RepeatedTest", "TestFactory", "Benchmark"})

_queries: dict[str, Any] = {}


def _query(language_name: str) -> Any:
    """The compiled query of ``language_name``'s patterns; None when it has none (or the
    grammar lacks a node kind they name: a grammar version the patterns do not know)."""
    if language_name in _queries:
        return _queries[language_name]
    query = None
    patterns = _PATTERNS.get(language_name)
    if patterns:
        from tree_sitter import Query

        from gitrag.index.chunking.treesitter import get_language

        try:
            query = Query(get_language(language_name), "\n".join(patterns))
        except Exception:  # noqa: BLE001 - an unexpected grammar version: no roles, never a failed chunking
            query = None
    _queries[language_name] = query
    return query


def _text(node: Any, data: bytes) -> str:
    return data[node.start_byte:node.end_byte].decode("utf-8", "replace")


def _next_item(node: Any) -> Any:
    """The named sibling after ``node`` that is not another attribute or a comment."""
    sib = node.next_named_sibling
    while sib is not None and (sib.type == "attribute_item" or "comment" in sib.type):
        sib = sib.next_named_sibling
    return sib


def _chain_top(node: Any, data: bytes) -> Any:
    """The outermost node of the method chain ``node`` starts (``Arg::new("x").long("x")``),
    and of the builder chain it is an argument of (``Command::new("app").arg(Arg::new(..))``)."""
    top = node
    for _ in range(256):  # bounded: a chain of 256 calls is already the whole declaration
        parent = top.parent
        if parent is not None and parent.type == "arguments":
            call = parent.parent
            func = call.child_by_field_name("function") if call is not None else None
            field = func.child_by_field_name("field") if func is not None and func.type == "field_expression" else None
            if field is None or _text(field, data) not in ("arg", "args"):
                break
            top = call
            continue
        if parent is None or parent.type not in ("field_expression", "call_expression"):
            break
        if parent.type == "call_expression" and parent.child_by_field_name("function") != top:
            break  # ``top`` is an argument, not the chain's receiver
        top = parent
    return top


def _span(capture: str, node: Any, sub: dict[str, Any], data: bytes) -> tuple[int, int] | None:
    """The byte range a capture marks, or None when its text rule rejects it."""
    name = _text(sub["n"], data) if "n" in sub else ""
    if capture == "decl_deco":
        return (node.start_byte, node.end_byte) if name in _PY_DECO else None
    if capture == "decl_call":
        return (node.start_byte, node.end_byte) if name in _PY_CALL else None
    if capture in ("test_attr", "decl_attr"):
        rule = _RUST_TEST if capture == "test_attr" else _RUST_DECL
        if not rule.match(_text(node, data)):
            return None
        item = _next_item(node)
        return (node.start_byte, item.end_byte if item is not None else node.end_byte)
    if capture == "decl_clap":
        if (_text(sub["p"], data), name) not in _RUST_CLAP:
            return None
        top = _chain_top(node, data)
        return (top.start_byte, top.end_byte)
    if capture == "decl_flag":
        ok = _GO_FLAG.match(name) and _GO_FLAGSET.search(_text(sub["p"], data))
        return (node.start_byte, node.end_byte) if ok else None
    if capture == "decl_js":
        return (node.start_byte, node.end_byte) if name in _JS_DECL else None
    if capture == "decl_javafield":
        return (node.start_byte, node.end_byte) if name in _JAVA_DECL else None
    if capture == "test_javamethod":
        return (node.start_byte, node.end_byte) if name in _JAVA_TEST else None
    if capture == "decl_getopt":
        return (node.start_byte, node.end_byte) if name == "option" else None
    return None


def role_ranges(tree: Any, language_name: str, data: bytes) -> dict[str, list[tuple[int, int]]]:
    """Per role (:data:`ROLES`), the sorted, disjoint ``[start, end)`` byte ranges of the
    tree that play it (see the module docstring); {} for a language without patterns or a
    tree with syntax errors (the query engine goes superlinear on wide ERROR nodes)."""
    query = _query(language_name)
    root = tree.root_node
    if query is None or root.has_error:
        return {}
    from tree_sitter import QueryCursor

    found: dict[str, list[tuple[int, int]]] = {}
    for _pattern, caps in QueryCursor(query).matches(root):
        sub = {k: v[0] for k, v in caps.items() if v and k in ("n", "p")}
        for capture, nodes in caps.items():
            if capture in ("n", "p") or not nodes:
                continue
            span = _span(capture, nodes[0], sub, data)
            if span is not None:
                found.setdefault(capture.split("_", 1)[0], []).append(span)
    return {role: _merged(spans) for role, spans in found.items()}


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out
