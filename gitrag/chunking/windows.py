"""Fallback splitting: line windows, and byte windows inside a line that is too long.

Every function here returns units that tile the given range exactly. Byte cuts fall on
UTF-8 character boundaries (a lead byte, never a continuation byte ``10xxxxxx``).
"""

from __future__ import annotations

from gitrag.chunking.split import Sizer, Unit

TEXT_MAX_LINES = 60  # line windows of plain text: at most this many lines...
TEXT_MIN_LINES = 40  # ...cut at a blank line after this many when there is one


def split_unit(unit: Unit, sizer: Sizer, *, max_lines: int = 0, min_lines: int = 0) -> list[Unit]:
    """Cut ``unit`` into consecutive windows that each fit the sizer (largest first).

    With ``max_lines`` a window holds at most that many lines; with ``min_lines`` it ends
    at the last blank line past ``min_lines`` when it can. A single character that does
    not fit (a header that alone exceeds the cap) is still emitted, so this always ends.
    """
    out: list[Unit] = []
    pos = unit.start
    while pos < unit.end:
        piece = _take(unit, pos, sizer, max_lines, min_lines)
        out.append(piece)
        pos = piece.end
    return out


def _piece(unit: Unit, start: int, end: int) -> Unit:
    return unit.copy(start=start, end=end, node=None, info=None, parts=())


def _line_cuts(sizer: Sizer, start: int, end: int, max_lines: int) -> list[int]:
    """Ends of the lines from ``start``, while they stay within the non-ws target."""
    data = sizer.data
    cuts: list[int] = []
    pos = start
    while pos < end:
        nl = data.find(b"\n", pos, end)
        cut = end if nl < 0 else nl + 1
        if cuts and sizer.nonws(start, cut) > sizer.target:
            break
        cuts.append(cut)
        if max_lines and len(cuts) >= max_lines:
            break
        pos = cut
    return cuts


def _take(unit: Unit, start: int, sizer: Sizer, max_lines: int, min_lines: int) -> Unit:
    cuts = _line_cuts(sizer, start, unit.end, max_lines)
    best = _largest(cuts, lambda cut: _piece(unit, start, cut), sizer)
    if best is None:
        return _take_bytes(unit, start, cuts[0], sizer)
    index, piece = best
    if min_lines and index + 1 > min_lines:
        blank = _last_blank(sizer.data, start, cuts[min_lines - 1 : index + 1])
        if blank is not None:
            return _piece(unit, start, blank)
    return piece


def _largest(cuts: list[int], make, sizer: Sizer) -> tuple[int, Unit] | None:  # type: ignore[no-untyped-def]
    """Binary search for the largest cut whose unit fits (the last one is tried first)."""
    last = make(cuts[-1])
    if sizer.fits(last):
        return len(cuts) - 1, last
    lo, hi, best = 0, len(cuts) - 2, None
    while lo <= hi:
        mid = (lo + hi) // 2
        piece = make(cuts[mid])
        if sizer.fits(piece):
            best, lo = (mid, piece), mid + 1
        else:
            hi = mid - 1
    return best


def _last_blank(data: bytes, start: int, cuts: list[int]) -> int | None:
    """The last cut in ``cuts`` that ends a blank line."""
    for cut in reversed(cuts):
        line_start = data.rfind(b"\n", start, cut - 1) + 1
        if not data[max(line_start, start) : cut].strip():
            return cut
    return None


def char_boundary(data: bytes, pos: int) -> int:
    """``pos`` moved back (at most 3 bytes) to the start of a UTF-8 character."""
    for _ in range(3):
        if pos <= 0 or pos >= len(data) or (data[pos] & 0xC0) != 0x80:
            break
        pos -= 1
    return pos


def _next_char(data: bytes, pos: int, end: int) -> int:
    nxt = pos + 1
    while nxt < end and nxt - pos < 4 and (data[nxt] & 0xC0) == 0x80:
        nxt += 1
    return nxt


def _take_bytes(unit: Unit, start: int, line_end: int, sizer: Sizer) -> Unit:
    """The longest fitting prefix of ``[start, line_end)`` ending on a character boundary."""
    data = sizer.data
    lo, hi = start + 1, line_end
    while lo < hi:  # largest position within the non-ws target
        mid = (lo + hi + 1) // 2
        if sizer.nonws(start, mid) <= sizer.target:
            lo = mid
        else:
            hi = mid - 1
    lo, hi, best = start + 1, lo, None
    while lo <= hi:
        mid = (lo + hi) // 2
        cut = char_boundary(data, mid)
        piece = _piece(unit, start, cut) if cut > start else None
        if piece is not None and sizer.fits(piece):
            best, lo = piece, mid + 1
        else:
            hi = mid - 1
    return best or _piece(unit, start, _next_char(data, start, line_end))
