"""docs/demo/report_devices.png: the first screen of a two-context report (issue #37), as a new user makes it.

The loop of issue #37 through the command line: the user's own network (tests/models/mynet.py, seven parts, one with
squeeze-and-excitation that `measure` refuses) timed through PyTorch eager and ONNX Runtime into one LUT, the
default importance proxy, `dsprof plan --for torch,onnxruntime --importance ... --keep K`, that plan timed beside the
original in each context (`measure --plan`), `dsprof report`; then the first 1280x900 pixels of report.html in
headless Chromium (tests/chromium.py, as tests/test_report_html.py drives it): each context's answer and the plan
for both, predicted and measured on each, above the fronts.

    .venv/bin/python benchmarks/devices_report_screenshot.py                       # 96 px -> docs/demo/report_devices.png
    .venv/bin/python benchmarks/devices_report_screenshot.py --quick --out /tmp/devices.png     # a smoke run (48 px)

Its latencies are one run on the machine at hand: take the docs' copy on a quiet machine.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the DevTools driver the report tests use

from chromium import Browser, find_chromium  # noqa: E402

from dsprof.cli import main as dsprof  # noqa: E402

BACKENDS = ("torch", "onnxruntime")


def run(*argv: object) -> None:
    code = dsprof([str(a) for a in argv])
    if code != 0:
        raise SystemExit(f"dsprof {' '.join(map(str, argv))} exited {code}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "demo" / "report_devices.png", help="the PNG")
    parser.add_argument("--work", type=Path, default=ROOT / "results" / "devices-demo", help="the run's files")
    parser.add_argument("--model-file", default=f"{ROOT / 'tests' / 'models' / 'mynet.py'}:build",
                        help="the network (PATH.py:FACTORY)")
    parser.add_argument("--resolution", type=int, default=96, help="input size, pixels")
    parser.add_argument("--keep", default="3", help="blocks that keep their activations in the plan for both")
    parser.add_argument("--quick", action="store_true", help="48 px, a tenth of the timing budget: a smoke run")
    args = parser.parse_args()
    chromium = find_chromium()
    if chromium is None:  # before the minutes of measuring
        raise SystemExit("no Chromium here: apt-get install -y chromium")
    resolution = 48 if args.quick else args.resolution
    model = ["--model-file", args.model_file, "--resolution", resolution]
    work = args.work
    timing = ["--threads", "1", "--budget", "0.05" if args.quick else "0.5", "--no-progress"]
    for backend in BACKENDS:
        run("measure", *model, "--backend", backend, "--variants", "original,merged,linear", "--model-variants",
            "original", "--spans", "2", *timing, "--out", work / "measurements", "--overwrite")
    run("build-lut", work / "measurements", "-o", work / "lut.csv")
    run("importance", *model, "--out", work / "importance.json")  # the default proxy
    run("plan", *model, "--lut", work / "lut.csv", "--max-span", "2", "--for", ",".join(BACKENDS), "--importance",
        work / "importance.json", "--keep", args.keep, "--out", work / "plans" / "fronts.json")
    for backend in BACKENDS:  # the plan for both, timed beside the original in each context
        run("measure", *model, "--backend", backend, "--blocks", "none", "--model-variants", "original", "--plan",
            work / "plans" / "fronts.plan.json", *timing, "--out", work / "checks", "--overwrite")
    run("report", work / "measurements", work / "checks", "--model-file", args.model_file, "--lut", work / "lut.csv",
        "--plans", work / "plans" / "fronts.plan.json", "--front", work / "plans" / "fronts.json",
        "-o", work / "report")
    with Browser(chromium) as browser:
        browser.open((work / "report" / "report.html").resolve().as_uri(), 1280, 900)
        png = browser.screenshot(0, 0, 1280, 900)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(png)
    print(f"wrote {args.out} ({len(png) // 1024} KiB)")


if __name__ == "__main__":
    main()
