"""Figures as self-contained SVG with a hover text per data point.

`tip` gives a matplotlib artist an id and a text; `figure_svg` saves the figure as SVG (glyphs as
paths: no font is fetched) and puts each text in a ``<title>`` element inside that artist's group,
which browsers show as a tooltip. Nothing else is added: no script, no external reference.
"""

from __future__ import annotations

import io
import itertools
import re
from html import escape

__all__ = ["figure_svg", "tip", "tips"]

_ids = itertools.count()


def tip(artist, text: str) -> None:
    """Attach a hover text to ``artist`` (already added to its figure's axes)."""
    gid = f"dsprof-tip-{next(_ids)}"
    artist.set_gid(gid)
    tips(artist.figure)[gid] = text


def tips(fig) -> dict[str, str]:
    """The hover texts of ``fig``, by artist id."""
    if not hasattr(fig, "_dsprof_tips"):
        fig._dsprof_tips = {}
    return fig._dsprof_tips


def figure_svg(fig) -> str:
    """``fig`` as an SVG document (no XML prolog, ready to inline in HTML or to write as a file),
    each hover text of `tip` in a ``<title>``."""
    import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "path"}):
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    text = text[text.index("<svg"):]  # drop the XML declaration and the DOCTYPE (its DTD address is never fetched)
    texts = tips(fig)

    def titled(match: re.Match) -> str:
        gid = match.group(1)
        return f'{match.group(0)}<title>{escape(texts[gid])}</title>' if gid in texts else match.group(0)

    return re.sub(r'<g id="(dsprof-tip-\d+)"[^>]*>', titled, text)
