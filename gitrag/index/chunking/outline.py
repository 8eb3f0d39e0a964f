"""Syntax tree -> units: top-level items, and the split of a unit at its children.

Cuts fall at the start of the line where the next item begins, so trailing comments and
blank lines stay with the code above them and leading indentation with the code below.
Comments (and Rust attributes) directly above a definition, with no blank line between,
belong to the definition. A class-like container splits into a header plus its members;
a function splits into fragments that all keep the function's name.
"""

from __future__ import annotations

from dataclasses import dataclass

from gitrag.index.chunking.labels import labels as node_labels
from gitrag.index.chunking.languages import LangSpec
from gitrag.index.chunking.names import DefInfo, Node, describe, signature
from gitrag.index.chunking.split import TINY_DEF_NONWS, Label, Sizer, Unit
from gitrag.index.chunking.text import one_line

_MAX_CHAIN = 64  # single-child nodes descended when looking for split points


@dataclass(frozen=True)
class Frame:
    """What the pieces of one split share."""

    group: int
    context: tuple[str, ...]  # pieces after the first
    first_context: tuple[str, ...]  # the piece holding the parent's start
    classify: bool  # definitions found here get their own units
    prefix: str
    member_kind: str
    kind: str  # kind of non-definition pieces
    labels: tuple[Label, ...]  # labels of non-definition pieces when not classifying
    fallback: str
    error: bool = False
    owner: int = 0  # the scope the pieces belong to (see ``Unit.owner``)


class Outline:
    """Units of one parsed file; :meth:`expand` is the ``expand`` of :func:`split.layout`."""

    def __init__(self, spec: LangSpec, data: bytes, sizer: Sizer) -> None:
        self.spec, self.data, self.sizer = spec, data, sizer
        self._groups = 0

    def top(self, root: Node) -> list[Unit]:
        base = Unit(0, len(self.data), "module", (), "<module>", (), 0, "free", node=root)
        kids = root.named_children
        if not kids:
            return [base]
        frame = Frame(0, (), (), True, "", "function", "module", (), "<module>",
                      root.type == "ERROR", owner=0)
        return self._split(base, kids, frame, header=None)

    def expand(self, unit: Unit) -> list[Unit]:
        """``unit`` split at its children (``[]`` when it has no usable split points)."""
        info: DefInfo | None = unit.info
        if info is not None and info.body is not None and info.body.named_child_count and (
            info.members is not None or info.kind == "module"
        ):
            return self._container(unit, info)
        if info is not None:
            kids = _kids(info.body) if info.body is not None else []
            return self._fragments(unit, info, kids or _kids(unit.node))
        return self._generic(unit)

    def _new_group(self) -> int:
        self._groups += 1
        return self._groups

    def _container(self, unit: Unit, info: DefInfo) -> list[Unit]:
        sig = signature(info, self.data)
        kind = "module" if info.kind == "module" else "class"
        group = self._new_group()
        frame = Frame(group, unit.context + (sig,), unit.context, True, unit.prefix,
                      info.member_kind, kind, (), info.name, owner=group)
        return self._split(unit, info.body.named_children, frame, header=((info.name, True),))

    def _fragments(self, unit: Unit, info: DefInfo, kids: list[Node]) -> list[Unit]:
        sig = signature(info, self.data)
        group = self._new_group()  # the definition's fragments are one scope
        frame = Frame(group, unit.context + (sig,), unit.context, False, unit.prefix,
                      unit.member_kind, unit.kind, unit.labels, unit.fallback, owner=group)
        return self._split(unit, kids, frame, header=None)

    def _generic(self, unit: Unit) -> list[Unit]:
        node = unit.node
        error = unit.mode == "error" or node.type == "ERROR"
        context = unit.context if error else unit.context + (self._first_line(node),)
        # pieces are named by their parent, unless the parent's name is a list of many
        fallback = unit.symbol if len(unit.labels) <= 2 else unit.fallback
        frame = Frame(self._new_group(), context, unit.context, unit.named_defs, unit.prefix,
                      unit.member_kind, "error" if error else unit.kind, unit.labels,
                      fallback, error, owner=unit.owner)
        return self._split(unit, _kids(node), frame, header=None)

    def _first_line(self, node: Node) -> str:
        nl = self.data.find(b"\n", node.start_byte, node.end_byte)
        end = node.end_byte if nl < 0 else nl
        return one_line(self.data[node.start_byte : end].decode("utf-8", "replace"))

    def _split(self, parent: Unit, nodes: list[Node], frame: Frame,
               header: tuple[Label, ...] | None) -> list[Unit]:
        """Units tiling ``parent`` with a cut before each span of ``nodes`` (and before the
        first one when a ``header`` piece is wanted)."""
        spans = self._spans(nodes, frame)
        bounds: list[int] = [parent.start]
        kept: list[tuple[list[Node], DefInfo | None]] = []
        for index, (span, info) in enumerate(spans):
            cut = self.data.rfind(b"\n", 0, span[0].start_byte) + 1
            if (index or header is not None) and bounds[-1] < cut < parent.end:
                bounds.append(cut)
                kept.append((span, info))
            elif kept:
                kept[-1] = (kept[-1][0] + span, kept[-1][1])
            else:
                kept.append((span, info))
        bounds.append(parent.end)
        units: list[Unit] = []
        offset = len(bounds) - 1 - len(kept)  # 1 when a header piece leads
        if offset:
            units.append(Unit(bounds[0], bounds[1], frame.kind, header or (), frame.fallback,
                              frame.first_context, frame.group, "head", owner=frame.owner))
        for i, (span, info) in enumerate(kept):
            start, end = bounds[i + offset], bounds[i + offset + 1]
            context = frame.first_context if start == parent.start else frame.context
            units.append(self._unit(start, end, span, info, frame, context))
        return units

    def _spans(self, nodes: list[Node], frame: Frame) -> list[tuple[list[Node], DefInfo | None]]:
        """Group nodes sharing a line; attach comments to the definition right below."""
        data = self.data
        spans: list[list[Node]] = []
        for node in nodes:
            if spans and data.find(b"\n", spans[-1][-1].end_byte, node.start_byte) < 0:
                spans[-1].append(node)
            else:
                spans.append([node])
        infos = [self._describe(span, frame) for span in spans]
        attach = self.spec.attach
        out: list[tuple[list[Node], DefInfo | None]] = []
        for span, info in reversed(list(zip(spans, infos))):
            if (out and out[0][1] is not None and all(n.type in attach for n in span)
                    and data.count(b"\n", span[-1].end_byte, out[0][0][0].start_byte) <= 1):
                out[0] = (span + out[0][0], out[0][1])
            else:
                out.insert(0, (span, info))
        return out

    def _describe(self, span: list[Node], frame: Frame) -> DefInfo | None:
        if not frame.classify:
            return None
        main = _main(span, self.spec)
        if main.type == "ERROR" or main.type in self.spec.attach:
            return None
        return describe(main, self.spec, self.data, frame.prefix)

    def _unit(self, start: int, end: int, span: list[Node], info: DefInfo | None, frame: Frame,
              context: tuple[str, ...]) -> Unit:
        main = _main(span, self.spec)
        if info is not None:
            return self._def_unit(start, end, main, info, frame, context)
        error = frame.error or main.type == "ERROR"
        labels = frame.labels
        if frame.classify:
            names: list[str] = []
            for node in span:
                names.extend(n for n in node_labels(node, self.spec, self.data, frame.prefix)
                             if n not in names)
            labels = tuple((n, False) for n in names[:8])
        return Unit(start, end, "error" if error else frame.kind, labels, frame.fallback, context,
                    frame.group, "error" if error else "free", node=main, owner=frame.owner,
                    prefix=frame.prefix,
                    member_kind=frame.member_kind, named_defs=frame.classify)

    def _def_unit(self, start: int, end: int, main: Node, info: DefInfo, frame: Frame,
                  context: tuple[str, ...]) -> Unit:
        kind = frame.member_kind if info.kind == "function" else info.kind
        if info.kind == "module":  # a namespace: named by what it holds
            body = info.body if info.body is not None else main
            names = node_labels(body, self.spec, self.data, frame.prefix)
            return Unit(start, end, "module", tuple((n, False) for n in names), info.name, context,
                        frame.group, "free", node=main, owner=frame.owner, info=info,
                        prefix=frame.prefix,
                        member_kind=frame.member_kind)
        small = self.sizer.nonws(start, end) <= TINY_DEF_NONWS
        return Unit(start, end, kind, ((info.name, True),), info.name, context, frame.group, "def",
                    node=main, owner=frame.owner, info=info, prefix=info.members or frame.prefix,
                    member_kind=info.member_kind, named_defs=info.members is not None,
                    small_def=small)


def _main(span: list[Node], spec: LangSpec) -> Node:
    for node in span:
        if node.type not in spec.attach:
            return node
    return span[0]


def _kids(node: Node | None) -> list[Node]:
    """Named children of the first node down a single-child chain that has several."""
    for _ in range(_MAX_CHAIN):
        if node is None:
            return []
        kids = node.named_children
        if len(kids) != 1:
            return kids
        node = kids[0]
    return []
