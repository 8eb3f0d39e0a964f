"""Fallback splitting: line windows, and byte windows inside a line that is too long.

Every function here returns units that tile the given range exactly. Byte cuts fall on
UTF-8 character boundaries (a lead byte, never a continuation byte ``10xxxxxx``).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

from gitrag.index.chunking.split import Sizer, Unit

TEXT_MAX_LINES = 60  # line windows of plain text: at most this many lines...
TEXT_MIN_LINES = 40  # ...cut at a blank line after this many when there is one
_MAX_PROBES = 6  # token counts spent looking for the longest fitting window
_AIM = 0.92  # proportional guesses aim this far below the cap...
_GOOD_ENOUGH = 0.85  # ...and a window this full is accepted at once


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
    """Ends of the lines from ``start``, while they stay within the non-ws target and
    number at most ``max_tokens`` non-blank lines (each costs at least one token)."""
    data = sizer.data
    cuts: list[int] = []
    pos, filled = start, 0
    while pos < end:
        nl = data.find(b"\n", pos, end)
        cut = end if nl < 0 else nl + 1
        if cuts and sizer.nonws(start, cut) > sizer.target:
            break
        filled += sizer.nonws(pos, cut) > 0
        if cuts and filled > sizer.max_tokens:
            break
        cuts.append(cut)
        if max_lines and len(cuts) >= max_lines:
            break
        pos = cut
    return cuts


def _take(unit: Unit, start: int, sizer: Sizer, max_lines: int, min_lines: int) -> Unit:
    cuts = _line_cuts(sizer, start, unit.end, max_lines)
    best = _search(len(cuts), lambda i: _piece(unit, start, cuts[i]), cuts.__getitem__,
                   lambda pos: bisect.bisect_right(cuts, pos) - 1, start, sizer)
    if best is None:
        return _take_bytes(unit, start, cuts[0], sizer)
    index, piece = best
    if min_lines and index + 1 > min_lines:
        blank = _last_blank(sizer.data, start, cuts[min_lines - 1 : index + 1])
        if blank is not None:
            return _piece(unit, start, blank)
    return piece


def _search(count: int, make: Callable[[int], Unit | None], position: Callable[[int], int],
            index_of: Callable[[int], int], start: int, sizer: Sizer) -> tuple[int, Unit] | None:
    """The largest candidate ``i`` in ``[0, count)`` whose unit fits, or ``None``.

    Fitting is taken to be monotone in ``i``. The first probes guess from the token
    count of the last failure (tokens grow about linearly with bytes), then bisection
    takes over; a fit filling :data:`_GOOD_ENOUGH` of the cap, or the best fit after
    :data:`_MAX_PROBES` probes, is accepted.
    """
    lo, hi, best, guess, probes = -1, count, None, count - 1, 0
    while hi - lo > 1:
        index = min(max(guess, lo + 1), hi - 1)
        piece = make(index)
        probes += 1
        if piece is not None and sizer.fits(piece):
            lo, best = index, (index, piece)
            if piece.tokens >= _GOOD_ENOUGH * sizer.max_tokens:
                break
        else:
            hi = index
        if best is not None and probes >= _MAX_PROBES:
            break
        guess = (lo + hi) // 2
        if probes <= 2 and piece is not None and piece.tokens > sizer.max_tokens:
            span = position(index) - start
            guess = index_of(start + int(span * _AIM * sizer.max_tokens / piece.tokens))
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
    while lo < hi:  # largest position within the non-ws target (O(1) per step)
        mid = (lo + hi + 1) // 2
        if sizer.nonws(start, mid) <= sizer.target:
            lo = mid
        else:
            hi = mid - 1

    def make(i: int) -> Unit | None:
        cut = char_boundary(data, start + 1 + i)
        return _piece(unit, start, cut) if cut > start else None

    best = _search(lo - start, make, lambda i: start + 1 + i, lambda pos: pos - start - 1,
                   start, sizer)
    if best is not None:
        return best[1]
    return _piece(unit, start, _next_char(data, start, line_end))
