"""The README and docs/ cannot rot: the quickstart runs, documented commands parse, links resolve.

The quickstart's commands are read from README.md itself and run in order at a small resolution with
short timing, so a renamed option or a changed default breaks this test, not a newcomer's first hour. The LUT
that build-lut writes gets tests/rule_lut.py's medians: what `predict` makes of it must not hang on the clock.
"""

import re
import shlex
from pathlib import Path

import pytest

from dsprof.cli import build_parser, main
from dsprof.merging import load_merged
from rule_lut import rule_lut_after

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.rglob("*.md"))]
SCRIPT = ".venv/bin/dsprof"

# How each quickstart command runs small: 32 px and timing short enough for a test (one thread).
FAST_TIMING = ["--threads", "1", "--warmup", "0", "--max-warmup", "0.05", "--min-samples", "3", "--max-samples", "4", "--budget", "0.01",
               "--min-sample-time", "0", "--no-progress"]
SMALL = {
    "models": [],
    "blocks": ["--resolution", "32"],
    "measure": ["--resolution", "32", *FAST_TIMING],
    "build-lut": [],
    "predict": ["--resolution", "32", "--no-progress"],
    "report": [],
    "merge": ["--resolution", "32"],
}
# Options whose value is a path the command writes.
OUTPUTS = ("--out", "-o", "--output", "--onnx", "--csv", "--measure-out")


def fenced_blocks(text: str, language: str) -> list[str]:
    """The contents of the ```language fenced blocks of a Markdown text, in order."""
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.S | re.M)


def section(text: str, heading: str) -> str:
    """The text under the first `## heading...` up to the next heading of level 1 or 2."""
    start = re.search(rf"^## {re.escape(heading)}.*$", text, flags=re.M)
    assert start, f"README.md has no '## {heading}' section"
    end = re.search(r"^#{1,2} ", text[start.end():], flags=re.M)
    return text[start.end(): start.end() + end.start()] if end else text[start.end():]


def command_lines(block: str) -> list[list[str]]:
    """The commands of a bash block (continuation lines joined, comments dropped) as argument lists."""
    joined = block.replace("\\\n", " ")
    return [args for line in joined.splitlines() if (args := shlex.split(line, comments=True))]


def quickstart() -> list[list[str]]:
    blocks = fenced_blocks(section(README.read_text(), "Quickstart"), "bash")
    assert blocks, "the README's quickstart has no ```bash block"
    return command_lines(blocks[0])


def test_quickstart_runs_as_written_at_a_small_resolution(tmp_path, monkeypatch, capsys, one_thread):
    monkeypatch.chdir(tmp_path)  # the commands write under results/ relative to the working folder
    commands = quickstart()
    assert len(commands) >= 5
    for args in commands:
        assert args[0] == SCRIPT, f"a quickstart command should start with {SCRIPT}: {shlex.join(args)}"
        sub = args[1]
        assert sub in SMALL, f"tests/test_docs.py does not know how to run `dsprof {sub}` small: add it to SMALL"
        code = main([*args[1:], *SMALL[sub]])
        assert code == 0, f"`{shlex.join(args)}` exited {code}: {capsys.readouterr().err[-2000:]}"
        rule_lut_after(args[1:])  # the fixed rule's medians: predict refuses a plan a busy clock priced at <= 0
        for option, value in zip(args, args[1:]):
            if option in OUTPUTS:
                assert (tmp_path / value).exists(), f"`{shlex.join(args)}` wrote no {value}"
    capsys.readouterr()
    # What the quickstart promises: the report's index, and a merged model that loads back and runs.
    index = tmp_path / "results/quickstart/report/index.md"
    assert "Block-wise latency" in index.read_text()
    merged = load_merged(tmp_path / "results/quickstart/merged.pt")
    import torch

    assert merged(torch.zeros(1, 3, 32, 32)).shape == (1, 1000)


def documented_commands() -> list[tuple[str, list[str]]]:
    """Every `.venv/bin/dsprof ...` command in a bash block of the README or docs/, with its page."""
    found = []
    for page in PAGES:
        for block in fenced_blocks(page.read_text(), "bash"):
            found += [(page.relative_to(ROOT).as_posix(), args) for args in command_lines(block) if args[0] == SCRIPT]
    return found


def test_every_documented_command_parses():
    commands = documented_commands()
    assert len(commands) >= 30  # the pages hold many examples; a parsing slip would drop them silently
    parser = build_parser()
    for page, args in commands:
        try:
            parser.parse_args(args[1:])
        except SystemExit as exc:
            pytest.fail(f"{page}: `{shlex.join(args)}` does not parse (exit {exc.code})")


LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def test_every_relative_link_points_to_a_file():
    checked = 0
    for page in PAGES:
        text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)  # no links inside code blocks
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue  # a web address or an anchor on the same page
            path = (page.parent / target.split("#")[0]).resolve()
            assert path.exists(), f"{page.relative_to(ROOT)} links to {target}, which does not exist"
            checked += 1
    assert checked >= 20


def test_every_docs_page_is_in_the_mkdocs_navigation():
    nav = set(re.findall(r":\s*([\w./-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), flags=re.M))
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md") if p.parent.name != "demo"}
    missing = sorted(pages - nav)
    assert not missing, f"add these pages to the nav of mkdocs.yml: {missing}"
    assert "index.md" in nav


def test_the_docs_site_builds_strictly(tmp_path):
    """`mkdocs build --strict` (a test extra): no broken link, no page or anchor mkdocs cannot resolve."""
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert (tmp_path / "site" / "reports" / "index.html").is_file()


def test_one_python_version_everywhere():
    """pyproject's requires-python is the version the README and the docs state."""
    floor = re.search(r'requires-python = ">=(3\.\d+)"', (ROOT / "pyproject.toml").read_text()).group(1)
    for page in PAGES:
        for stated in re.findall(r"Python (?:≥ ?|>= ?)?(3\.\d+)\+?", page.read_text()):
            if stated != "3.6":  # the edge runner's floor (docs/devices): a different program
                assert stated == floor, f"{page.relative_to(ROOT)} says Python {stated}; pyproject: {floor}"


def test_the_model_zoo_table_is_the_same_in_the_readme_and_the_docs():
    def zoo(text: str) -> list[str]:
        return [line for line in section(text, "The model zoo").splitlines() if line.startswith("|")]

    readme, docs = zoo(README.read_text()), zoo((DOCS / "models.md").read_text())
    assert len(readme) >= 8 and readme == docs


def test_the_development_page_code_runs_as_written():
    """docs/development.md's python blocks: each concept imported from its one home (issue #44)."""
    text = (ROOT / "docs" / "development.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)
    assert blocks, "docs/development.md shows no code"
    for block in blocks:
        exec(compile(block, "docs/development.md", "exec"), {})

