"""Hostile strings and the checks that follow each use of them (issue #45): what a file from someone else may carry,
and what dsprof must never do with it.

`HOSTILE` is a fixed list, by class (path traversal, links, markup, spreadsheet formulas, LaTeX, shell, control
characters, size, wrong types). After a command read a file that carries one of them:

- `changes_outside`: nothing was written, changed or removed outside the output folder (a snapshot of a tree above it);
- `page_problems`: no script link (`javascript:`, `data:`, `vbscript:`...) and no raw script or markup in any page
  (report.html: only dsprof's own sorting script; index.md and the tables' Markdown: no raw HTML at all);
- `csv_problems`: no CSV cell that starts with = + - @ (or a tab or carriage return) and is not a number;
- `latex_problems`: no LaTeX command that reads or writes a file or defines one (\\input, \\include, \\write...);
- `command_problems`: every `dsprof ...` command printed for copying re-splits, in a POSIX shell, to its own words:
  no unquoted command substitution ($( or a backtick), no unquoted ; | &, no quote left open;
- `run_problems`: exit 0, or exit 2 with exactly one error line on stderr (besides one-line warnings); no traceback.

Each check returns a list of problems (empty: passed), so that a test can say every one at once.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import re
import traceback
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Callable

import pytest

__all__ = ["ABS", "CLASSES", "HOSTILE", "HOSTILE_IDS", "MODEL", "PLAN", "changes_outside", "command_problems",
           "commands_in", "csv_problems", "html_problems", "importance_file", "latex_problems", "lut_with",
           "markdown_problems", "output_problems", "page_problems", "received_files", "resolve_hostile",
           "run_problems", "snapshot"]

#: stands for an absolute folder of the test's own (its value is only known when the test runs): `resolve_hostile`.
#: Absolute paths point there, never to the machine's own files, so that a write through one is seen and harmless.
ABS = "{ABS}"

_LONG = "A" * 5000

#: (id, value, class). Values are JSON values: most are strings; the "type" class holds other JSON types (and NaN,
#: which Python's json writes as NaN and reads back).
HOSTILE: list[tuple[str, Any, str]] = [
    # paths
    ("dotdot", "../../x", "path"),
    ("dotdot_deep", "../../../../../../outside/FUZZESC", "path"),
    ("mid_dotdot", "x/../../y", "path"),
    ("abs", ABS + "/ABSPWN", "path"),
    ("abs_etc", ABS + "/etc/passwd", "path"),  # an absolute path (inside the test's folder: a write is seen there)
    ("slash_dotdot", ABS + "/../../../outside/ESCAPED", "path"),
    ("backslash_dotdot", "..\\..\\winesc", "path"),
    ("dot", ".", "path"),
    ("dotdot_alone", "..", "path"),
    ("tilde", "~/PWN_home", "path"),
    # links in Markdown
    ("js_link", "[x](javascript:alert%28document.domain%29)", "link"),
    ("js_link_caps", "[click](JaVaScRiPt:alert(1))", "link"),
    ("data_link", "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)", "link"),
    ("vbs_link", "[x](vbscript:msgbox(1))", "link"),
    ("autolink_js", "<javascript:alert(1)>", "link"),
    ("img_js", "![i](javascript:alert(1))", "link"),
    # raw markup
    ("script", "<script>alert(1)</script>", "html"),
    ("img_onerror", "<img src=x onerror=alert(1)>", "html"),
    ("svg_onload", "<svg onload=alert(1)>", "html"),
    ("attr_break", "\"><script>alert(1)</script>", "html"),
    ("iframe", "<iframe src=\"javascript:alert(1)\"></iframe>", "html"),
    # spreadsheet formulas
    ("csv_cmd", "=cmd|' /C calc'!A0", "csv"),
    ("csv_plus", "+1", "csv"),
    ("csv_minus", "-1+2", "csv"),
    ("csv_at", "@SUM(1)", "csv"),
    ("csv_hyperlink", "=HYPERLINK(\"http://x\",\"y\")", "csv"),
    ("csv_tab", "\t=1+1", "csv"),
    # LaTeX and mathtext
    ("tex_input", "\\input{/etc/passwd}", "tex"),
    ("tex_write", "\\immediate\\write18{touch PWN}", "tex"),
    ("tex_braces", "a{b}c~d^e&f%g#h_i", "tex"),
    ("mathtext", "$\\undefined$", "tex"),
    ("mathtext_frac", "$\\frac{1}{$", "tex"),
    # shell
    ("subst", "cpu$(touch PWN)", "shell"),
    ("backticks", "cpu`touch PWN`", "shell"),
    ("semicolon", "cpu; rm -rf x", "shell"),
    ("pipe_amp", "cpu | touch PWN && echo", "shell"),
    ("quote", "it's \"quoted\"", "shell"),
    ("dash", "--out=" + ABS + "/DASHPWN", "shell"),
    # control characters
    ("newline", "line1\nline2", "control"),
    ("crlf", "a\r\nb", "control"),
    ("nul", "a\x00b", "control"),
    ("escape", "\x1b[31mred\x1b[0m", "control"),
    # size and unicode
    ("long", _LONG, "size"),
    ("empty", "", "size"),
    ("unicode", "Ünïcødé 设备 🚀", "size"),
    ("rtl", "\u202eexe.txt", "size"),
    # wrong types
    ("list", ["a", "../b"], "type"),
    ("dict", {"a": "<script>"}, "type"),
    ("null", None, "type"),
    ("huge_int", 10 ** 30, "type"),
    ("huge_float", 1e308, "type"),
    ("nan", math.nan, "type"),
    ("negative", -1, "type"),
    ("bool", True, "type"),
]
HOSTILE_IDS = [h[0] for h in HOSTILE]
CLASSES = sorted({h[2] for h in HOSTILE})


def resolve_hostile(value: Any, absolute: Path) -> Any:
    """``value`` with `ABS` replaced by the folder ``absolute`` (recursively in lists and dicts)."""
    if isinstance(value, str):
        return value.replace(ABS, str(absolute))
    if isinstance(value, list):
        return [resolve_hostile(v, absolute) for v in value]
    if isinstance(value, dict):
        return {k: resolve_hostile(v, absolute) for k, v in value.items()}
    return value


# -- files written -----------------------------------------------------------------------------------------------

def snapshot(folder: Path) -> dict[str, str]:
    """Every file and folder under ``folder`` (and itself): path -> SHA-256 of the bytes ('dir' for a folder,
    'link -> target' for a symbolic link)."""
    shot = {}
    for p in [folder, *folder.rglob("*")]:
        key = str(p)
        if p.is_symlink():
            shot[key] = f"link -> {p.readlink()}"
        elif p.is_dir():
            shot[key] = "dir"
        else:
            shot[key] = hashlib.sha256(p.read_bytes()).hexdigest()
    return shot


def changes_outside(before: dict[str, str], after: dict[str, str], allowed: Path) -> list[str]:
    """Paths added, changed or removed between two `snapshot`s that are not ``allowed`` or below it."""
    def inside(path: str) -> bool:
        p = Path(path)
        return p == allowed or allowed in p.parents
    changed = {p for p in set(before) | set(after) if before.get(p) != after.get(p)}
    return [f"written outside the output folder: {p}" for p in sorted(changed) if not inside(p)]


# -- pages ---------------------------------------------------------------------------------------------------------

_OWN_SCRIPT = 'document.querySelectorAll("table.sortable th")'  # report.html's one script: its sortable tables
_SAFE_SCHEME = re.compile(r"^(https?:|#|[^:/?#]*(?:[/?#]|$))", re.I)  # http(s), a fragment, or relative (no scheme)
_IMAGE_DATA = re.compile(r"^data:image/(png|svg\+xml|jpeg);base64,", re.I)
_URL_ATTRS = {"href", "src", "xlink:href", "action", "formaction", "srcdoc", "data", "poster", "background"}


class _PageParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("iframe", "object", "embed", "frame", "frameset", "base", "form"):
            self.problems.append(f"raw <{tag}> element")
        if tag == "script":
            self._in_script = True
            self.scripts.append("")
        for name, value in attrs:
            value = (value or "").strip()
            # a browser ignores control characters and spaces inside a scheme: "java\nscript:" runs
            squeezed = re.sub(r"[\x00-\x20]", "", value)
            if name.startswith("on"):
                self.problems.append(f"event handler attribute <{tag} {name}=...>")
            elif name in _URL_ATTRS and squeezed:
                if tag == "img" and name == "src" and _IMAGE_DATA.match(squeezed):
                    continue
                if not _SAFE_SCHEME.match(squeezed):
                    self.problems.append(f"link with an unsafe target <{tag} {name}={value[:80]!r}>")
            elif name == "style" and ("expression(" in value.lower() or "url(" in value.lower()):
                self.problems.append(f"style with a url or expression <{tag} style={value[:80]!r}>")

    handle_startendtag = handle_starttag

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts[-1] += data


def html_problems(text: str, name: str) -> list[str]:
    """A page's script links, event handlers, raw frames and any script but dsprof's own sorting script."""
    parser = _PageParser()
    parser.feed(text)
    parser.close()
    problems = [f"{name}: {p}" for p in parser.problems]
    problems += [f"{name}: a script that is not dsprof's own: {s.strip()[:80]!r}" for s in parser.scripts
                 if not s.strip().startswith(_OWN_SCRIPT)]
    return problems


_RAW_TAG = re.compile(r"<\s*/?\s*[a-zA-Z][a-zA-Z0-9:-]*[\s/>]|<[a-zA-Z][a-zA-Z0-9+.-]*:", re.S)  # a tag or autolink
_MD_LINK = re.compile(r"(?<!\\)\]\(\s*<?([^)\s>]*)")
_MD_DEFINITION = re.compile(r"^ {0,3}(?<!\\)\[[^\]]+\]:\s*<?(\S*?)>?(?:\s|$)", re.M)  # [label]: target


def markdown_problems(text: str, name: str) -> list[str]:
    """Raw HTML (a tag or an autolink: Markdown passes both to the page) and links whose target has a scheme other
    than http(s)."""
    problems = [f"{name}: raw markup {m.group(0)[:40]!r}" for m in _RAW_TAG.finditer(text)]
    for m in [*_MD_LINK.finditer(text), *_MD_DEFINITION.finditer(text)]:
        target = re.sub(r"[\x00-\x20]", "", m.group(1))
        if target and not _SAFE_SCHEME.match(target):
            problems.append(f"{name}: Markdown link to {target[:80]!r}")
    return problems


def page_problems(out: Path) -> list[str]:
    """`html_problems` of every .html, `markdown_problems` of every .md under ``out``."""
    problems = []
    for p in sorted(out.rglob("*.html")):
        problems += html_problems(p.read_text(encoding="utf-8", errors="replace"), str(p.relative_to(out)))
    for p in sorted(out.rglob("*.md")):
        problems += markdown_problems(p.read_text(encoding="utf-8", errors="replace"), str(p.relative_to(out)))
    return problems


# -- CSV and LaTeX -------------------------------------------------------------------------------------------------

def _number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def csv_problems(out: Path) -> list[str]:
    """Cells of every .csv under ``out`` that a spreadsheet would read as a formula: starting with = + - @ (or a
    tab or carriage return, OWASP's list) and not a number."""
    problems = []
    for p in sorted(out.rglob("*.csv")):
        text = p.read_text(encoding="utf-8", errors="replace")
        for row_number, row in enumerate(csv.reader(io.StringIO(text, newline="")), 1):
            for cell in row:
                if cell[:1] in ("=", "+", "-", "@", "\t", "\r") and not _number(cell):
                    problems.append(f"{p.relative_to(out)}, row {row_number}: formula cell {cell[:60]!r}")
    return problems


_TEX_DANGER = re.compile(r"(?<!\\)(?:\\\\)*\\(input|include|write|immediate|openin|openout|read|catcode|def|edef|gdef|"
                         r"csname|usepackage|newcommand|renewcommand|let|special|directlua)(?![a-zA-Z])")


def latex_problems(out: Path) -> list[str]:
    """LaTeX commands in any .tex under ``out`` that read, write or define something (dsprof's tables use none)."""
    problems = []
    for p in sorted(out.rglob("*.tex")):
        for m in _TEX_DANGER.finditer(p.read_text(encoding="utf-8", errors="replace")):
            problems.append(f"{p.relative_to(out)}: LaTeX command \\{m.group(1)}")
    return problems


def output_problems(out: Path) -> list[str]:
    """Pages, CSV cells and LaTeX under ``out`` (nothing when it does not exist)."""
    if not out.exists():
        return []
    return page_problems(out) + csv_problems(out) + latex_problems(out)


# -- commands printed ----------------------------------------------------------------------------------------------

_COMMANDS = ("models", "blocks", "measure", "export", "import", "explain", "merge", "plan", "build-lut", "predict",
             "report", "search", "importance", "finetune")
_START = re.compile(r"\bdsprof (" + "|".join(re.escape(c) for c in _COMMANDS) + r")(?=[ `]|$)")


def commands_in(text: str) -> list[tuple[str, str]]:
    """Each `dsprof COMMAND ...` printed in ``text`` (not the ``dsprof COMMAND: error:`` prefix of a message), as
    (command text, problem or ''): read the way a POSIX shell reads it, from ``dsprof`` to the end of the line or to
    an unquoted backtick that closes the Markdown code span around it."""
    found = []
    for line in text.splitlines():
        for m in _START.finditer(line):
            if line[m.end():m.end() + 1] == ":":
                continue  # "dsprof report: error: ..."
            found.append(_shell_read(line, m.start()))
    return found


def _shell_read(line: str, start: int) -> tuple[str, str]:
    state, i = "", start  # state: '' (unquoted), "'" or '"'
    while i < len(line):
        c = line[i]
        if state == "'":
            if c == "'":
                state = ""
        elif c == "\\":
            i += 1  # the next character is taken literally (in double quotes, only some are: close enough)
        elif state == '"':
            if c == '"':
                state = ""
            elif c == "`" or line.startswith("$(", i):
                return line[start:i + 2], f"command substitution inside double quotes at {line[i:i + 20]!r}"
        elif c in "'\"":
            state = c
        elif line.startswith("$(", i):
            return line[start:i + 2], f"unquoted command substitution at {line[i:i + 20]!r}"
        elif c == "`":
            rest = line[i + 1:]
            # a backtick that closes the code span is followed by prose, not by more of the command
            if rest[:1] not in ("", " ", ".", ",", ";", ":", ")", "'", "\"") or \
                    re.match(r"[^`]*\s--?[a-z]", rest.split("`")[0] if "`" in rest else ""):
                return line[start:i + 1], f"unquoted backtick inside the command at {line[i:i + 20]!r}"
            return line[start:i], ""
        elif c in ";|&":
            return line[start:i + 1], f"unquoted {c!r} (a second command) at {line[i:i + 20]!r}"
        i += 1
    if state:
        return line[start:], f"a quote left open ({state})"
    return line[start:], ""


def command_problems(*texts: str) -> list[str]:
    """The problems of every command `commands_in` the ``texts``."""
    return [f"printed command {cmd[:120]!r}: {problem}" for text in texts for cmd, problem in commands_in(text)
            if problem]


# -- the run itself ------------------------------------------------------------------------------------------------

def run_problems(run: Callable[[], Any], command: str) -> tuple[Any, list[str]]:
    """Run ``run`` (a `dsprof_here` call of ``dsprof COMMAND``): its result and its problems: an exception (the
    traceback a user would see), an exit status other than 0 and 2, or exit 2 with other than exactly one error line
    on stderr besides one-line warnings, or a traceback printed."""
    try:
        result = run()
    except BaseException as exc:  # noqa: BLE001 -- any of them is what the test is looking for
        if isinstance(exc, KeyboardInterrupt):
            raise
        tb = traceback.format_exception(exc)
        return None, [f"dsprof {command}: traceback {type(exc).__name__}: {str(exc)[:200]!r} at "
                      f"{tb[-2].strip().splitlines()[0] if len(tb) > 1 else ''}"]
    problems = []
    err_lines = result.stderr.splitlines()
    if "Traceback" in result.stderr or "Traceback" in result.stdout:
        problems.append(f"dsprof {command}: a traceback printed")
    if result.returncode not in (0, 2):
        problems.append(f"dsprof {command}: exit status {result.returncode}")
    if result.returncode == 2:
        errors = [line for line in err_lines if not line.startswith("warning: ")]
        if len(errors) != 1 or not errors[0].startswith(f"dsprof {command}: error: "):
            problems.append(f"dsprof {command}: exit 2 without exactly one error line: {result.stderr[-300:]!r}")
    return result, problems


# -- the files someone sends, built once per process -------------------------------------------------------------

MODEL = ["--model", "mobilenet_v2", "--depths", "1,1,1,1,1,1,1", "--resolution", "32"]
_BUILT: dict[str, dict[str, Path]] = {}


def _plan():
    from dsprof.records.plan import Plan

    return Plan("mobilenet_v2", (1, 0, 1, 0, 0, 1, 1), {"depths": [1] * 7}, name="tiny-ds").with_merge(
        [False, True, False, True, True, False, False])


PLAN = _plan()  # keeps blocks 0, 2, 5, 6; merges 1, 3, 4 (a merge list: a report draws its memory plot)


def received_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The files of each kind, as dsprof writes them, for the tests to edit (never to change in place): mobilenet_v2
    (one block a stage) measured at 32 px with a tiny budget (blocks original, merged, linear; the whole model), its
    LUT with tests/rule_lut.py's medians, the front `dsprof plan --max-span 1` writes from it, `PLAN`, and a bundle
    of one block (TorchScript) with the results its runner wrote here. Built once per process (both test modules
    read them)."""
    if "files" in _BUILT:
        return _BUILT["files"]
    import subprocess
    import sys

    from dsprof.cli import main
    from dsprof.lut import build_lut
    from dsprof.profiler import TimingConfig, Workloads, measure
    from dsprof.models import ModelRef
    from rule_lut import rule_lut

    src = tmp_path_factory.mktemp("received-files")
    fast = TimingConfig(warmup_s=0.0, warmup_min_iters=1, warmup_max_s=0.01, first_warmup_s=0.0,
                        min_samples=3, max_samples=4, budget_s=0.01, min_sample_s=0.0)
    result = measure(ModelRef.of("mobilenet_v2", options={"depths": [1] * 7}, resolution=32),
                     workloads=Workloads(variants=("original", "merged", "linear"), model_variants=("original",)),
                     timing=fast, out=src / "m.jsonl", progress=False)
    rule_lut(build_lut([result.path]).save(src / "lut.csv"), result.path)
    assert main(["plan", "--lut", str(src / "lut.csv"), *MODEL, "--max-span", "1", "--out",
                 str(src / "front.json")]) == 0
    (src / "plan.json").write_text(PLAN.to_json())
    importance_file(src / "importance.json", data={"name": "digits", "resolution": 64})  # at 64 px: a plan at 32 px
    # prints the `dsprof importance` that scores it at 32 px
    assert main(["export", *MODEL, "--blocks", "features.1", "--model-variants", "none", "--format", "torchscript",
                 "--out", str(src / "bundle"), "--quiet", "--warmup", "0", "--max-warmup", "0.05", "--min-samples", "3", "--max-samples", "4",
                 "--budget", "0.01", "--min-sample-time", "0"]) == 0
    done = subprocess.run([sys.executable, str(src / "bundle" / "run_bundle.py"), "--runtime", "torchscript",
                           "--threads", "1", "--out", str(src / "results.jsonl"), "--quiet"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    _BUILT["files"] = {"dir": src, "records": result.path, "lut": src / "lut.csv", "front": src / "front.json",
                       "plan": src / "plan.json", "importance": src / "importance.json", "bundle": src / "bundle",
                       "manifest": src / "bundle" / "manifest.json", "results": src / "results.jsonl"}
    return _BUILT["files"]


def lut_with(source: Path, target: Path, end: str | None = "checksum", **columns: Any) -> Path:
    """The LUT file ``source`` with each of ``columns`` set to a value (its text) in every row, written to ``target``
    with its end line (`end`: "checksum", recomputed; "bare", its row count without a checksum)."""
    from dsprof.lut.table import table_checksum

    text = source.read_text()
    rows = list(csv.reader(io.StringIO("".join(line for line in text.splitlines(keepends=True)
                                               if not line.startswith("#")))))
    header = rows[0]
    for row in rows[1:]:
        for column, value in columns.items():
            row[header.index(column)] = str(value)
    body = io.StringIO()
    csv.writer(body, lineterminator="\n").writerows(rows)
    n = len(rows) - 1
    tail = f"# end rows={n} sha256={table_checksum(body.getvalue())}" if end == "checksum" else f"# end rows={n}"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(f"{body.getvalue()}{tail}\n")
    return target


def importance_file(path: Path, **fields) -> Path:
    """An importance file as `dsprof importance` writes it (the format of dsprof/records/importance.py's
    docstring) for mobilenet_v2 with one block a stage, scored at 32 px, with ``fields`` replaced."""
    record = {"format": "dsprof.importance", "version": 1,
              "model": {"name": "mobilenet_v2", "options": {"depths": [1] * 7},
                        "blocks": [f"features.{i}" for i in range(1, 8)], "num_classes": 1000},
              "data": {"name": "digits", "resolution": 32},
              "proxy": {"name": "zero-shot", "unit": "loss", "settings": {}},
              "importance": [0.5, 0.1, 0.3, 0.05, 0.2, 0.4, 0.6], "ranking": [6, 0, 5, 2, 4, 1, 3]}
    record.update(fields)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))
    return path
