"""How a span (consecutive blocks merged as one convolution) is written for people: the one spelling.

Files (plans, fronts, LUT-free JSON) keep a span as a half-open ``[start, stop)`` list of block indices,
as Python slices do; everything a person reads or types writes it as the inclusive range ``start-last``
(``[0, 2]`` is ``0-1``), several separated by spaces in output (``0-1 3-4``) and by commas on the command
line (``--spans 0-1,3-4``, which also takes spaces). docs/planning.md says so once.
"""

from __future__ import annotations

import re
from typing import Iterable, Sequence

from ..errors import UsageError

__all__ = ["format_span", "format_spans", "parse_spans"]


def format_span(span: Sequence[int]) -> str:
    """``(start, stop)`` (half-open) as the inclusive range ``start-last``, e.g. ``(3, 5)`` -> ``3-4``."""
    start, stop = (int(v) for v in span)
    return f"{start}-{stop - 1}"


def format_spans(spans: Iterable[Sequence[int]] | None, none: str = "") -> str:
    """Spans as inclusive ranges separated by spaces (``0-1 3-4``); ``none`` where there are none."""
    return " ".join(format_span(s) for s in spans or ()) or none


def parse_spans(text: str) -> tuple[tuple[int, int], ...]:
    """Inclusive ranges as typed (``0-1,3-4`` or ``0-1 3-4``) as half-open ``(start, stop)`` pairs."""
    parts = [p for p in re.split(r"[,\s]+", text.strip()) if p]
    spans = []
    for part in parts:
        match = re.fullmatch(r"(\d+)-(\d+)", part)
        if match is None or int(match[2]) <= int(match[1]):
            raise UsageError(f"a span is an inclusive range of 2+ block indices like 0-1 or 3-5, got {part!r} "
                             f"(in {text!r})")
        spans.append((int(match[1]), int(match[2]) + 1))
    if not spans:
        raise UsageError(f"no span in {text!r}: give inclusive block ranges like 0-1,3-5")
    return tuple(spans)
