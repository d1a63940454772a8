"""The README's picture of `make demo`'s report: the first 1280x900 pixels of report.html in headless Chromium.

    python benchmarks/demo_screenshot.py                                   # results/report/report.html -> docs/demo/report_first_screen.png
    python benchmarks/demo_screenshot.py results/onnxruntime/report/report.html --out docs/demo/report_first_screen_ort.png

Chromium is driven as tests/test_report_html.py drives it (tests/chromium.py, DevTools over a WebSocket, standard
library only); it opens the file offline. Run it after `make demo` on a quiet machine, so that the numbers on the
page are the ones quoted in the README.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from chromium import Browser, find_chromium  # noqa: E402


def screenshot(page: Path, out: Path, width: int = 1280, height: int = 900) -> Path:
    """Write a PNG of the first ``width`` x ``height`` CSS pixels of ``page`` to ``out``."""
    binary = find_chromium()
    if binary is None:
        sys.exit("no Chromium here: `apt-get install -y chromium` (or `make chromium` as root), then run this again")
    if not page.is_file():
        sys.exit(f"no {page}: run `make demo` first")
    with Browser(binary) as browser:
        browser.open(page.resolve().as_uri(), width, height)
        png = browser.screenshot(0, 0, width, height)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(png)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("page", nargs="?", type=Path, default=ROOT / "results" / "report" / "report.html",
                        help="the report page `make demo` wrote")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "demo" / "report_first_screen.png",
                        help="the PNG to write")
    parser.add_argument("--width", type=int, default=1280, help="window width, CSS pixels")
    parser.add_argument("--height", type=int, default=900, help="window height, CSS pixels")
    args = parser.parse_args()
    print(f"wrote {screenshot(args.page, args.out, args.width, args.height)}")


if __name__ == "__main__":
    main()
