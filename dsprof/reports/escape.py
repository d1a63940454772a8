"""The escapes of what dsprof writes for people to open: a page's links (`safe_link`), Markdown that carries no raw
HTML and no other link (`markdown_safe`), LaTeX text (`latex_escape`). Names, devices and notes in a report come from
files that may come from anyone (docs/security.md): every writer of pages and tables passes them through these,
and nowhere else escapes them (CSV cells: `dsprof.io.csv_cell`; figures' text: `dsprof.reports.plots`)."""

from __future__ import annotations

import re
from html import unescape

__all__ = ["latex_escape", "markdown_safe", "safe_link"]

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
_RELATIVE = re.compile(r"[A-Za-z0-9._~#?-]")  # how a relative target starts: not "/", "\\", "<", ...


def safe_link(target: str) -> bool:
    """Whether a page may link to ``target``: an ``http``/``https`` URL or a relative path (``plots/front.png``);
    never another scheme (``javascript:``, ``data:``, ``file:``, ``vbscript:``), an absolute path or ``//host``.
    Read as a browser reads it: character references decoded, whitespace and control characters dropped (markdown-it's
    ``validateLink`` and the URL standard alike). Both pages (`markdown_page`, `html_page`) link only through it."""
    plain = "".join(ch for ch in unescape(target) if ch > " " and ch != "\x7f")
    scheme = _SCHEME.match(plain)
    if scheme:
        return scheme.group(1).lower() in ("http", "https")
    return bool(_RELATIVE.match(plain))


# A Markdown link's end, ``](TARGET`` (inline link or image) or ``]: TARGET`` (a reference definition).
_MD_LINK = re.compile(r"\]\(\s*<?([^\s)>]*)|\]:[ \t]*\n?[ \t]*<?(\S*)")


def markdown_safe(text: str) -> str:
    """Markdown text (``index.md``) that shows what the HTML page shows: no raw HTML (every ``<`` written
    ``&lt;``: no ``<script>``, no ``<img onerror>``, no autolink) and no link whose target `safe_link` refuses
    (its ``]`` escaped, so that a reader shows the text, not a link)."""
    text = text.replace("<", "&lt;")

    def defuse(m: re.Match) -> str:
        slashes = 0
        while m.start() > slashes and m.string[m.start() - slashes - 1] == "\\":
            slashes += 1
        escaped = slashes % 2  # an escaped ``\]`` ends no link
        target = m.group(1) if m.group(1) is not None else m.group(2)
        return m.group(0) if escaped or safe_link(target) else "\\" + m.group(0)

    return _MD_LINK.sub(defuse, text)


#: Every character LaTeX reads as markup, and what stands for it in text (`latex_escape`).
_LATEX = {"\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
          "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "µ": r"\textmu{}"}


def latex_escape(text: object) -> str:
    """``text`` as LaTeX text that shows it as it is: every special character (``\\ { } ~ ^ & % $ # _``) escaped, so
    that a name from a file cannot run a command (``\\input{...}``); ``µ`` as ``\\textmu{}``. The one LaTeX escape of
    every table dsprof writes (`render`)."""
    return "".join(_LATEX.get(ch, ch) for ch in str(text))
