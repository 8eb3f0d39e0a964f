"""Language detection and the per-language node-type tables of the tree-sitter chunker.

A :class:`LangSpec` says which syntax nodes are definitions (functions, class-like
containers whose members are chunked separately, plain types), which are wrappers around
a definition (decorators, ``export``, ``template``), which are namespaces (transparent for
qualified names) and which comments/attributes attach to the definition below them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_F = frozenset


@dataclass(frozen=True)
class LangSpec:
    """Node-type tables of one tree-sitter language (names as in the grammar)."""

    name: str
    sep: str = "."
    functions: frozenset[str] = _F()
    containers: frozenset[str] = _F()
    types: frozenset[str] = _F()
    namespaces: frozenset[str] = _F()
    wrappers: frozenset[str] = _F()
    attach: frozenset[str] = _F({"comment"})
    imports: frozenset[str] = _F()
    # node types whose name/label extraction needs the language's own rules
    special: frozenset[str] = _F()


_JS_FUNCS = _F({
    "function_declaration", "generator_function_declaration", "method_definition",
    "function_signature", "method_signature", "abstract_method_signature",
})
_JS_COMMON: dict[str, Any] = dict(  # LangSpec fields shared by the JS family
    functions=_JS_FUNCS,
    containers=_F({"class_declaration", "abstract_class_declaration", "interface_declaration",
                   "class", "internal_module", "module"}),
    types=_F({"type_alias_declaration", "enum_declaration"}),
    wrappers=_F({"export_statement", "ambient_declaration"}),
    imports=_F({"import_statement"}),
    special=_F({"lexical_declaration", "variable_declaration", "expression_statement",
                "field_definition", "public_field_definition"}),
)
_C_TYPES = _F({"struct_specifier", "union_specifier", "enum_specifier"})

SPECS: dict[str, LangSpec] = {
    "python": LangSpec(
        "python", functions=_F({"function_definition"}),
        containers=_F({"class_definition"}), wrappers=_F({"decorated_definition"}),
        imports=_F({"import_statement", "import_from_statement", "future_import_statement"}),
    ),
    "javascript": LangSpec("javascript", **_JS_COMMON),
    "typescript": LangSpec("typescript", **_JS_COMMON),
    "tsx": LangSpec("tsx", **_JS_COMMON),
    "go": LangSpec(
        "go", functions=_F({"function_declaration", "method_declaration"}),
        imports=_F({"import_declaration", "package_clause"}), special=_F({"type_declaration"}),
    ),
    "rust": LangSpec(
        "rust", sep="::", functions=_F({"function_item", "function_signature_item",
                                         "macro_definition"}),
        containers=_F({"impl_item", "trait_item", "mod_item"}),
        types=_F({"struct_item", "enum_item", "union_item"}),
        attach=_F({"line_comment", "block_comment", "attribute_item"}),
        imports=_F({"use_declaration", "extern_crate_declaration"}),
    ),
    "java": LangSpec(
        "java", functions=_F({"method_declaration", "constructor_declaration",
                              "compact_constructor_declaration"}),
        containers=_F({"class_declaration", "interface_declaration", "enum_declaration",
                       "record_declaration", "annotation_type_declaration"}),
        attach=_F({"line_comment", "block_comment"}),
        imports=_F({"import_declaration", "package_declaration"}),
    ),
    "kotlin": LangSpec(
        "kotlin", functions=_F({"function_declaration", "secondary_constructor"}),
        containers=_F({"class_declaration", "object_declaration", "companion_object"}),
        types=_F({"type_alias"}),
        attach=_F({"line_comment", "block_comment"}),
        imports=_F({"import", "package_header"}),
    ),
    "c": LangSpec(
        "c", functions=_F({"function_definition"}), types=_C_TYPES,
        namespaces=_F({"linkage_specification"}),
        imports=_F({"preproc_include"}), special=_F({"type_definition"}),
    ),
    "cpp": LangSpec(
        "cpp", sep="::", functions=_F({"function_definition"}),
        containers=_F({"class_specifier", "struct_specifier", "union_specifier"}),
        types=_F({"enum_specifier", "concept_definition"}),
        namespaces=_F({"namespace_definition", "linkage_specification"}),
        wrappers=_F({"template_declaration"}),
        imports=_F({"preproc_include", "using_declaration"}), special=_F({"type_definition"}),
    ),
    "csharp": LangSpec(
        "csharp", functions=_F({
            "method_declaration", "constructor_declaration", "destructor_declaration",
            "operator_declaration", "conversion_operator_declaration",
            "property_declaration", "indexer_declaration"}),
        containers=_F({"class_declaration", "struct_declaration", "interface_declaration",
                       "record_declaration"}),  # ``record struct`` too
        types=_F({"enum_declaration", "delegate_declaration"}),
        namespaces=_F({"namespace_declaration"}),
        imports=_F({"using_directive", "file_scoped_namespace_declaration"}),
    ),
    "php": LangSpec(
        "php", functions=_F({"function_definition", "method_declaration"}),
        containers=_F({"class_declaration", "interface_declaration", "trait_declaration",
                       "enum_declaration"}),
        namespaces=_F({"namespace_definition"}),
        imports=_F({"namespace_use_declaration"}),
    ),
    "ruby": LangSpec(
        "ruby", functions=_F({"method", "singleton_method"}),
        containers=_F({"class", "module", "singleton_class"}),
    ),
}

_EXTENSIONS: dict[str, str] = {
    "py": "python", "pyi": "python", "pyw": "python",
    "js": "javascript", "mjs": "javascript", "cjs": "javascript", "jsx": "javascript",
    "ts": "typescript", "mts": "typescript", "cts": "typescript", "tsx": "tsx",
    "go": "go", "rs": "rust", "java": "java", "kt": "kotlin", "kts": "kotlin",
    "c": "c", "cc": "cpp", "cpp": "cpp", "cxx": "cpp", "c++": "cpp", "hpp": "cpp",
    "hh": "cpp", "hxx": "cpp", "h++": "cpp", "ipp": "cpp", "tpp": "cpp", "inl": "cpp",
    "cs": "csharp", "php": "php", "rb": "ruby", "rake": "ruby", "gemspec": "ruby",
    "md": "markdown", "markdown": "markdown", "mdx": "markdown", "rst": "rst",
    "toml": "ini", "ini": "ini", "cfg": "ini", "conf": "ini",
}
_FILENAMES = {"Rakefile": "ruby", "Gemfile": "ruby", "Vagrantfile": "ruby",
              "setup.cfg": "ini", "tox.ini": "ini", ".editorconfig": "ini"}
_SHEBANGS = (("python", "python"), ("node", "javascript"), ("deno", "typescript"),
             ("ruby", "ruby"), ("php", "php"))
_CPP_HINTS = re.compile(rb"\b(?:class|namespace|template|typename|public:|private:)\b|::")

# every name ``language_for`` gives a file: the values of the ``language`` payload (``--lang``)
LANGUAGES: tuple[str, ...] = tuple(sorted({*SPECS, *_EXTENSIONS.values(), *_FILENAMES.values(), "text"}))


def language_for(path: str, data: bytes) -> str | None:
    """The chunker's language for a file: a key of :data:`SPECS`, ``markdown``, ``rst``,
    ``ini`` or ``text``; ``None`` when ``data`` looks binary (a NUL byte in its first 8 KiB).

    A ``.h`` header is ``cpp`` when it contains C++ constructs, else ``c``.
    """
    if b"\0" in data[:8192]:
        return None
    name = path.rsplit("/", 1)[-1]
    if name in _FILENAMES:
        return _FILENAMES[name]
    ext = name.rsplit(".", 1)[-1].lower() if "." in name.lstrip(".") else ""
    if ext == "h":
        return "cpp" if _CPP_HINTS.search(data) else "c"
    if ext in _EXTENSIONS:
        return _EXTENSIONS[ext]
    if data.startswith(b"#!"):
        first = data[:200].split(b"\n", 1)[0].decode("ascii", "replace")
        for needle, lang in _SHEBANGS:
            if needle in first:
                return lang
    return "text"
