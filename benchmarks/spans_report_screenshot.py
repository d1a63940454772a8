"""docs/demo/report_spans.png: report.html's block table and block-latency figure for a plan with spans (issue #31).

Measures a model with what the planner needs (originals, merged, linear and the spans of 2 blocks), builds the LUT,
plans the fastest plan keeping ``--keep`` activations, writes the report with that plan marked, and takes a headless
Chromium screenshot (tests/chromium.py) of the block table's section and the block-latency figure, one above the
other in the order the page shows them, in a window wide enough for the whole table (the page's width cap
lifted): every span its own row and bar, the kept-activation markers on the plan's blocks.

    .venv/bin/python benchmarks/spans_report_screenshot.py --out docs/demo/report_spans.png      # MobileNetV2, 224 px
    .venv/bin/python benchmarks/spans_report_screenshot.py --quick --out /tmp/spans.png            # a smoke run (64 px)

Its latencies are one run on the machine at hand: take the docs' copy on a quiet machine.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the DevTools driver the report tests use

from chromium import Browser, find_chromium  # noqa: E402

from dsprof.cli import main as dsprof  # noqa: E402

CLIP = """(function () {
    document.body.style.maxWidth = "none";  // the page's width cap lifted: the whole block table, every column
    function region(el, content) {  // from the page's left edge to the right of its content (an image, a table)
        var r = el.getBoundingClientRect();
        var c = content.getBoundingClientRect();
        var right = content.naturalWidth ? c.left + Math.min(c.width, content.naturalWidth) : c.right;
        return {y: r.top + window.scrollY, height: r.height, width: right + 16}; }
    var table = document.getElementById("table-blocks");
    var figure = document.getElementById("figure-block_latency");
    var regions = [region(table.closest("section"), table), region(figure, figure.querySelector("svg, img") || figure)];
    return regions.sort(function (a, b) { return a.y - b.y; }); })()"""


def stack(pngs: list[bytes]) -> bytes:
    """The regions one above the other, in page order, on white."""
    from PIL import Image

    images = [Image.open(io.BytesIO(png)).convert("RGB") for png in pngs]
    out = Image.new("RGB", (max(i.width for i in images), sum(i.height for i in images)), "white")
    y = 0
    for image in images:
        out.paste(image, (0, y))
        y += image.height
    buffer = io.BytesIO()
    out.save(buffer, format="PNG")
    return buffer.getvalue()


def run(*argv: str) -> None:
    code = dsprof([str(a) for a in argv])
    if code != 0:
        raise SystemExit(f"dsprof {' '.join(map(str, argv))} exited {code}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "demo" / "report_spans.png")
    parser.add_argument("--work", type=Path, default=ROOT / "results" / "spans-demo")
    parser.add_argument("--keep", default="8", help="blocks that keep their activations in the plan shown")
    parser.add_argument("--quick", action="store_true", help="64 px, a tenth of the timing budget: a smoke run")
    args = parser.parse_args()
    model = ["--model", "mobilenet_v2", "--resolution", "64" if args.quick else "224"]
    work = args.work
    run("measure", *model, "--variants", "original,merged,linear", "--model-variants", "original", "--spans", "2",
        "--threads", "1", "--budget", "0.05" if args.quick else "0.5", "--no-progress", "--out", work / "m.jsonl",
        "--overwrite")
    run("build-lut", work / "m.jsonl", "-o", work / "lut.csv")
    run("plan", *model, "--lut", work / "lut.csv", "--max-span", "2", "--keep", args.keep, "--out", work / "front.json")
    run("report", work / "m.jsonl", "--plans", work / "front.plan.json", "-o", work / "report")
    chromium = find_chromium()
    if chromium is None:
        raise SystemExit("no Chromium here: apt-get install -y chromium")
    with Browser(chromium, timeout=300) as browser:  # a 2600 px wide capture of a long section takes a while
        browser.open((work / "report" / "report.html").resolve().as_uri(), width=2600, height=900)
        regions = browser.evaluate(CLIP)  # the block table's section and the block-latency figure, in page order
        png = stack([browser.screenshot(0, r["y"], r["width"], r["height"]) for r in regions])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(png)
    print(f"wrote {args.out} ({len(png) // 1024} KiB)")


if __name__ == "__main__":
    main()
