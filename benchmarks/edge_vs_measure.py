"""Does the bundle runner time like the profiler? (issue #16)

Exports MobileNetV2 (all 17 blocks x {original, merged, flops_matched}, the original and FLOPs-matched
whole models, stem and head) as an ONNX bundle, then alternates, ``--rounds`` times, a direct
``dsprof measure --backend onnxruntime`` run and the bundle's runner in a separate Python that has no
torch and no dsprof (``.venv-edge-onnxruntime``, ``make edge-venvs``, or ``--device-python``), in
alternating order (direct first in odd rounds, runner first in even ones). The runner's results are
imported; each side's records are pooled into a LUT. Prints, per LUT entry, the ratio
runner / direct of the medians (median, range, share within 10 %), and, as the noise floor, the
same ratio between the direct runs of two rounds. Load average before and after.

    .venv/bin/python benchmarks/edge_vs_measure.py [--resolution 224] [--threads 1] [--rounds 2] [--opset 13]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dsprof.edge import EDGE_OPSET, export_bundle, import_results
from dsprof.lut import build_lut
from dsprof.profiler import BackendSettings, TimingConfig, measure
from dsprof.models import ModelRef

ROOT = Path(__file__).resolve().parents[1]


def medians(paths: list[Path]) -> dict[tuple, float]:
    frame = build_lut(paths).to_dataframe()
    return {(r.scope, r.workload, r.variant): r.median_s for r in frame.itertuples()}


def describe(name: str, ratios: list[float]) -> str:
    within = sum(abs(r - 1) <= 0.10 for r in ratios)
    return (f"{name}: median {statistics.median(ratios):.3f}, range {min(ratios):.2f}-{max(ratios):.2f}, "
            f"within 10 %: {within}/{len(ratios)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--resolution", type=int, default=224)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--opset", type=int, default=EDGE_OPSET, help="ONNX opset of the bundle (measure exports 17)")
    parser.add_argument("--device-python", type=Path, default=ROOT / ".venv-edge-onnxruntime" / "bin" / "python",
                        help="the Python that runs the bundle (NumPy + onnxruntime only)")
    parser.add_argument("--out", type=Path, default=None, help="keep the files here (default: a temporary folder)")
    args = parser.parse_args()
    if not args.device_python.exists():
        sys.exit(f"{args.device_python} does not exist; run `make edge-venvs` or give --device-python")
    out = args.out or Path(tempfile.mkdtemp(prefix="dsprof-edge-"))
    timing = TimingConfig()
    load_before = os.getloadavg()
    start = time.perf_counter()
    bundle = export_bundle(ModelRef.of("mobilenet_v2", resolution=args.resolution), timing=timing, out=out / "bundle",
                           overwrite=True, opset=args.opset).path
    print(f"export: {time.perf_counter() - start:.1f} s, {len(list((bundle / 'models').iterdir()))} files")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    direct, edge = [], []
    for r in range(args.rounds):
        for side in (("direct", "runner") if r % 2 == 0 else ("runner", "direct")):
            t0 = time.perf_counter()
            if side == "direct":
                res = measure(ModelRef.of("mobilenet_v2", resolution=args.resolution),
                              settings=BackendSettings(backend="onnxruntime", threads=args.threads), timing=timing,
                              out=out / "direct" / f"round{r}.jsonl", overwrite=True, progress=False)
                direct.append(res.path)
            else:
                results = out / "runner" / f"round{r}.jsonl"
                results.unlink(missing_ok=True)
                subprocess.run([str(args.device_python), str(bundle / "run_bundle.py"), "--runtime", "onnxruntime",
                                "--threads", str(args.threads), "--out", str(results), "--quiet"],
                               cwd=out, env=env, check=True)
                edge.append(import_results(bundle, results, out=out / "imported" / f"round{r}.jsonl",
                                           overwrite=True).path)
            print(f"round {r} {side}: {time.perf_counter() - t0:.1f} s, load average {os.getloadavg()[0]:.2f}")
    a, b = medians(edge), medians(direct)
    assert set(a) == set(b), "the runner's LUT keys differ from measure's"
    keys = sorted(b)
    print(f"{len(keys)} LUT entries (MobileNetV2 {args.resolution} px, batch 1, fp32, onnxruntime, "
          f"{args.threads} thread(s), bundle opset {args.opset}), {args.rounds} rounds each side")
    print(describe("runner / direct, pooled", [a[k] / b[k] for k in keys]))
    for kind in ("block", "model", "stem", "head"):
        ratios = [a[k] / b[k] for k in keys if k[0] == kind]
        if ratios:
            print("  " + describe(kind, ratios))
    if len(direct) >= 2:
        d0, d1 = medians(direct[:1]), medians(direct[1:2])
        print(describe("noise floor: direct round 1 / direct round 0", [d1[k] / d0[k] for k in keys]))
        e0, e1 = medians(edge[:1]), medians(edge[1:2])
        print(describe("noise floor: runner round 1 / runner round 0", [e1[k] / e0[k] for k in keys]))
    load_after = os.getloadavg()
    print(f"load average (1, 5, 15 min) before {tuple(round(v, 2) for v in load_before)}, "
          f"after {tuple(round(v, 2) for v in load_after)}; wall {time.perf_counter() - start:.0f} s; files in {out}")


if __name__ == "__main__":
    main()
