"""A report's sections, and the two pages made from them: ``index.md`` (Markdown) and
``report.html`` (one self-contained file: figures inline as SVG with hover texts, tables sortable
by a click on a header, no network access of any kind).

A section is a title and a list of parts: Markdown text (a paragraph or a list), a `Lead` (the answer the page
opens with), a `Table`, a `Plot`. The page shows what a reader can use: numbers rounded to what the timing noise
allows (`shown`; the ``data-value`` of each HTML cell and the CSV files keep every digit), a block's short name
with its full spec on hover, every figure's data as CSV beside it, and nothing wider than a 1280-pixel window.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from html import escape, unescape
from typing import Union

import pandas as pd

from ..units import percent
from .escape import markdown_safe, safe_link
from .tables import display_units, is_relative

__all__ = ["Lead", "Plot", "Section", "Table", "html_page", "markdown_page", "shown"]


@dataclass
class Table:
    """A table of the report; ``name`` is its file stem under ``tables/`` (None: not written as files);
    ``digits``: the decimals of its text, Markdown and LaTeX files."""

    name: str | None
    frame: pd.DataFrame
    digits: int = 2


@dataclass
class Plot:
    """A figure of the report: its PNG (relative path) for Markdown, its SVG text for HTML, and the CSV of the
    data it draws (relative path; None: none)."""

    name: str
    alt: str
    png: str
    svg: str
    data: str | None = None


@dataclass
class Lead:
    """A paragraph the page opens with (the answer, `dsprof.reports.summary`): shown larger; the first has
    ``id="summary"``, the others ``summary-2``, ``summary-3``..."""

    text: str


@dataclass
class Section:
    title: str
    parts: list[Union[str, Lead, Table, Plot]] = field(default_factory=list)
    id: str | None = None


#: Columns shown as speed-ups (two decimals: the medians are timed to about 2 %); relative changes: `is_relative`.
_RATIO = re.compile(r"(speedup|speed-up|ratio)(_low|_high)?$")


def shown(value: object, column: str = "") -> str:
    """A table value as the page shows it: integers whole; speed-ups and ratios with two decimals; relative errors,
    gaps and losses as signed percent with one decimal (`percent`); other numbers (ms, µs, FPS, KiB) to three significant digits, which
    is as far as a median timed to about 2 % goes; text as it is; missing values empty."""
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return ""
    if isinstance(value, bool) or isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return str(value)
    number = float(value)
    name = str(column).rsplit(": ", 1)[-1]
    if _RATIO.search(name):
        return f"{number:.2f}"
    if is_relative(column):
        return percent(number)
    if number == 0 or math.isinf(number):
        return f"{number:g}"
    decimals = max(0, 2 - math.floor(math.log10(abs(number))))
    return f"{number:.{decimals}f}"


def _rounded(frame: pd.DataFrame, digits: int = 2) -> pd.DataFrame:
    """``frame`` as its page shows it: units per `display_units`, every value as `shown` text."""
    frame = display_units(frame, digits)
    out = frame.astype(object).copy()
    for column in frame.columns:
        out[column] = [shown(v.item() if hasattr(v, "item") else v, str(column)) for v in frame[column]]
    return out


def markdown_page(title: str, sections: list[Section]) -> str:
    """The report as Markdown (``index.md``)."""
    lines = [f"# {title}", ""]
    for section in sections:
        lines += [f"## {section.title}", ""]
        for part in section.parts:
            if isinstance(part, Table):
                lines += [_rounded(part.frame, part.digits).to_markdown(index=False, disable_numparse=True), ""]
                if part.name:
                    lines += [f"(also as [CSV](tables/{part.name}.csv), [LaTeX](tables/{part.name}.tex))", ""]
            elif isinstance(part, Plot):
                lines += [f"![{part.alt}]({part.png})", ""]
                if part.data:
                    lines += [f"(data as [CSV]({part.data}))", ""]
            elif isinstance(part, Lead):
                lines += [f"**{part.text}**", ""]
            else:
                lines += [part, ""]
    return markdown_safe("\n".join(lines))


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 72rem; padding: 0 1rem; color: #222;
       overflow-wrap: break-word; }
h1 { font-size: 1.6rem; } h2 { font-size: 1.25rem; margin-top: 2.2rem; border-bottom: 1px solid #ddd; }
code { background: #f3f3f3; padding: 0 .2em; border-radius: 3px; overflow-wrap: anywhere; }
p.lead { font-size: 1.15rem; line-height: 1.5; margin: .8rem 0; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: .85rem; margin: .6rem 0; max-width: 100%; }
th, td { border-bottom: 1px solid #e3e3e3; padding: .25rem .5rem; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; overflow-wrap: normal; }
td[title] { text-decoration: underline dotted #999; cursor: help; }
th { cursor: pointer; background: #f7f7f7; user-select: none; }
th[data-dir="asc"]::after { content: " \\25B2"; } th[data-dir="desc"]::after { content: " \\25BC"; }
figure.plot { margin: 1rem 0; } figure.plot svg { max-width: 100%; height: auto; }
figure.plot [id^="dsprof-tip-"]:hover { opacity: .35; }
.files { font-size: .8rem; color: #666; }
"""

# Sort a table by the clicked column: numbers by their full value (data-value), text as text; again reverses.
_SCRIPT = """
document.querySelectorAll("table.sortable th").forEach(function (th) {
  th.addEventListener("click", function () {
    var table = th.closest("table"), body = table.tBodies[0], column = th.cellIndex;
    var dir = th.dataset.dir === "asc" ? "desc" : "asc";
    table.querySelectorAll("th").forEach(function (h) { delete h.dataset.dir; });
    th.dataset.dir = dir;
    function key(row) {
      var cell = row.cells[column];
      return cell.dataset.value !== undefined ? Number(cell.dataset.value) : cell.textContent;
    }
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = key(a), y = key(b), order;
      if (typeof x === "number" && typeof y === "number") {
        if (isNaN(x) || isNaN(y)) { return isNaN(x) - isNaN(y); }  // empty cells last either way
        order = x - y;
      } else { order = String(x).localeCompare(String(y)); }
      return dir === "asc" ? order : -order;
    });
    rows.forEach(function (row) { body.appendChild(row); });
  });
});
"""


def _inline(text: str) -> str:
    """Markdown's inline code, bold and links (`safe_link` targets only; another stays text) as HTML, the rest
    escaped."""
    out = escape(text, quote=False)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    out = re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", out)

    def link(m: re.Match) -> str:
        target = unescape(m.group(2))
        return f'<a href="{escape(target)}">{m.group(1)}</a>' if safe_link(target) else m.group(0)

    return re.sub(r"\[([^\]]+)\]\(([^)\s]+)\)", link, out)


def _text(part: str) -> str:
    lines = part.splitlines()
    if lines and all(line.startswith("- ") for line in lines):
        items = "<ul>" + "".join(f"<li>{_inline(line[2:])}</li>" for line in lines) + "</ul>"
        return items if len(lines) <= 12 else f"<details><summary>{len(lines)} entries</summary>{items}</details>"
    return f"<p>{_inline(part)}</p>"


def _cell(value: object, column: str, title: str | None = None) -> str:
    hover = f' title="{escape(title)}"' if title else ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
        return f'<td class="num" data-value="{number!r}"{hover}>{shown(value, column)}</td>'
    return f"<td{hover}>{_inline(shown(value, column))}</td>"


def html_table(table: Table) -> str:
    """A sortable HTML table; latencies in the unit `display_units` chooses, as in the Markdown; numbers as `shown`
    (each cell's ``data-value`` keeps the full value). A table with a ``block`` and a ``spec`` column shows the
    block's name with its spec on hover (``title``) instead of a spec column."""
    frame = display_units(table.frame, table.digits)
    specs = list(frame["spec"]) if {"block", "spec"} <= set(frame.columns) else None
    if specs is not None:
        frame = frame.drop(columns="spec")
    columns = [str(c) for c in frame.columns]
    head = "".join(f"<th>{escape(c).replace('_', '_<wbr>')}</th>" for c in columns)  # long names may wrap at _
    rows = []
    for i, values in enumerate(frame.astype(object).itertuples(index=False)):
        cells = [_cell(v.item() if hasattr(v, "item") else v, c,
                       specs[i] if specs is not None and c == "block" and isinstance(specs[i], str) else None)
                 for c, v in zip(columns, values)]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    attrs = f' id="table-{escape(table.name)}"' if table.name else ""
    files = (f'<p class="files">also as <a href="tables/{escape(table.name)}.csv">CSV</a>, '
             f'<a href="tables/{escape(table.name)}.tex">LaTeX</a></p>') if table.name else ""
    return (f'<div class="scroll"><table class="sortable"{attrs}><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table></div>{files}")


def _figure(plot: Plot) -> str:
    data = f'<a href="{escape(plot.data)}">CSV</a>, ' if plot.data else ""
    return (f'<figure class="plot" id="figure-{escape(plot.name)}" aria-label="{escape(plot.alt)}">{plot.svg}'
            f'<figcaption class="files">data as {data}<a href="{escape(plot.png)}">PNG</a></figcaption></figure>')


def html_page(title: str, sections: list[Section]) -> str:
    """The report as one HTML file that needs nothing else to open."""
    body = [f"<h1>{escape(title)}</h1>"]
    leads = 0
    for section in sections:
        anchor = f' id="{escape(section.id)}"' if section.id else ""
        body.append(f"<section{anchor}><h2>{_inline(section.title)}</h2>")
        for part in section.parts:
            if isinstance(part, Table):
                body.append(html_table(part))
            elif isinstance(part, Plot):
                body.append(_figure(part))
            elif isinstance(part, Lead):  # the first is the summary; one id per element
                leads += 1
                body.append(f'<p class="lead" id="summary{"" if leads == 1 else f"-{leads}"}">{_inline(part.text)}</p>')
            else:
                body.append(_text(part))
        body.append("</section>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{escape(title)}</title>"
            f"<style>{_STYLE}</style></head><body>\n" + "\n".join(body) + f"\n<script>{_SCRIPT}</script>\n</body></html>\n")
