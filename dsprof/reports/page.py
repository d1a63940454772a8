"""A report's sections, and the two pages made from them: ``index.md`` (Markdown) and
``report.html`` (one self-contained file: figures inline as SVG with hover texts, tables sortable
by a click on a header, no network access of any kind).

A section is a title and a list of parts: Markdown text (a paragraph or a list), a `Table`, a `Plot`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from html import escape
from typing import Union

import pandas as pd

from .tables import display_units, render

__all__ = ["Plot", "Section", "Table", "html_page", "markdown_page"]


@dataclass
class Table:
    """A table of the report; ``name`` is its file stem under ``tables/`` (None: not written as files)."""

    name: str | None
    frame: pd.DataFrame
    digits: int = 2


@dataclass
class Plot:
    """A figure of the report: its PNG (relative path) for Markdown and its SVG text for HTML."""

    name: str
    alt: str
    png: str
    svg: str


@dataclass
class Section:
    title: str
    parts: list[Union[str, Table, Plot]] = field(default_factory=list)


def markdown_page(title: str, sections: list[Section]) -> str:
    """The report as Markdown (``index.md``)."""
    lines = [f"# {title}", ""]
    for section in sections:
        lines += [f"## {section.title}", ""]
        for part in section.parts:
            if isinstance(part, Table):
                lines += [render(part.frame, "markdown", part.digits), ""]
                if part.name:
                    lines += [f"(also as [CSV](tables/{part.name}.csv), [LaTeX](tables/{part.name}.tex))", ""]
            elif isinstance(part, Plot):
                lines += [f"![{part.alt}]({part.png})", ""]
            else:
                lines += [part, ""]
    return "\n".join(lines)


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 72rem; padding: 0 1rem; color: #222; }
h1 { font-size: 1.6rem; } h2 { font-size: 1.25rem; margin-top: 2.2rem; border-bottom: 1px solid #ddd; }
code { background: #f3f3f3; padding: 0 .2em; border-radius: 3px; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: .85rem; margin: .6rem 0; }
th, td { border-bottom: 1px solid #e3e3e3; padding: .25rem .5rem; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
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
    """Markdown's inline code, bold and links as HTML (the rest escaped)."""
    out = escape(text, quote=False)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    out = re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", out)
    return re.sub(r"\[([^\]]+)\]\(([^)\s]+)\)", lambda m: f'<a href="{escape(m.group(2))}">{m.group(1)}</a>', out)


def _text(part: str) -> str:
    lines = part.splitlines()
    if lines and all(line.startswith("- ") for line in lines):
        items = "<ul>" + "".join(f"<li>{_inline(line[2:])}</li>" for line in lines) + "</ul>"
        return items if len(lines) <= 12 else f"<details><summary>{len(lines)} entries</summary>{items}</details>"
    return f"<p>{_inline(part)}</p>"


def _cell(value: object, digits: int) -> str:
    if isinstance(value, (bool,)) or value is None:
        return f"<td>{'' if value is None else value}</td>"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
        shown = "" if math.isnan(number) else (str(value) if isinstance(value, int) else format(number, f".{digits}f"))
        return f'<td class="num" data-value="{number!r}">{shown}</td>'
    if pd.isna(value):
        return "<td></td>"
    return f"<td>{_inline(str(value))}</td>"


def html_table(table: Table) -> str:
    """A sortable HTML table; latencies in the unit `display_units` chooses, as in the Markdown."""
    frame = display_units(table.frame, table.digits)
    head = "".join(f"<th>{escape(str(c))}</th>" for c in frame.columns)
    rows = []
    for values in frame.astype(object).itertuples(index=False):
        cells = [_cell(v.item() if hasattr(v, "item") else v, table.digits) for v in values]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    attrs = f' id="table-{escape(table.name)}"' if table.name else ""
    files = (f'<p class="files">also as <a href="tables/{escape(table.name)}.csv">CSV</a>, '
             f'<a href="tables/{escape(table.name)}.tex">LaTeX</a></p>') if table.name else ""
    return (f'<div class="scroll"><table class="sortable"{attrs}><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table></div>{files}")


def html_page(title: str, sections: list[Section]) -> str:
    """The report as one HTML file that needs nothing else to open."""
    body = [f"<h1>{escape(title)}</h1>"]
    for section in sections:
        body.append(f"<section><h2>{_inline(section.title)}</h2>")
        for part in section.parts:
            if isinstance(part, Table):
                body.append(html_table(part))
            elif isinstance(part, Plot):
                body.append(f'<figure class="plot" id="figure-{escape(part.name)}" aria-label="{escape(part.alt)}">'
                            f"{part.svg}</figure>")
            else:
                body.append(_text(part))
        body.append("</section>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{escape(title)}</title>"
            f"<style>{_STYLE}</style></head><body>\n" + "\n".join(body) + f"\n<script>{_SCRIPT}</script>\n</body></html>\n")
