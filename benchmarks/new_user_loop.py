"""The whole loop on models nobody tuned for, as a new user runs it: the `dsprof` commands as written, one process each.

For each model (a timm name, built at random, nothing downloaded): ``dsprof blocks``; ``dsprof measure`` with spans of
two and ``--calibrate`` (quick timing: ``--budget 0.05 --max-warmup 0.05``, a first look, not figures to keep);
``dsprof build-lut``; ``dsprof plan --keep 0.5``; ``dsprof merge`` of the chosen plan; ``dsprof measure --plan`` (the
plan merged and timed paired against the original). Then, in this process, the merged model against the linearised
original in float64 on two random images (the merge's exactness; the merged weights are float32, so ~1e-7 is exact).

    .venv/bin/python benchmarks/new_user_loop.py --out /tmp/new_user repvit_m0_9 mnasnet_small
    .venv/bin/python benchmarks/new_user_loop.py --out /tmp/new_user mobileone_s0 --option reparameterize=true

``--default-timing`` drops the quick flags (one thread still: figures to quote, run alone under quiet-run);
``--variants`` gives `measure` its block variants (default: the backend's); ``--backend`` the runtime every command
times and plans on (default PyTorch eager); ``--zoo dsprof`` takes dsprof's own names (``resnet18``) where the default
takes timm's:

    .venv/bin/python benchmarks/new_user_loop.py --out /tmp/lin --default-timing mobileone_s0 --option reparameterize=true
    .venv/bin/python benchmarks/new_user_loop.py --out /tmp/base --default-timing --variants original,merged,flops_matched \
        mobileone_s0 --option reparameterize=true

A command that fails is printed with its last line, and the model's row says where the loop stopped. Prints one row
per model: blocks, the chosen k, predicted and measured speed-up (95 % intervals), whether the measurement lies in the
predicted interval, and the merge's largest relative error.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import warnings
from pathlib import Path

import torch

DSPROF = [sys.executable, "-m", "dsprof"]
ONE = ["--threads", "1", "--no-progress"]
QUICK = ["--budget", "0.05", "--warmup", "0", "--max-warmup", "0.05", "--min-samples", "3", "--max-samples", "8"]
# "k = 3 of 7 blocks", or "the one plan (no activation to remove)" where every block is linear already (k = 0 of 0)
CHOSEN = re.compile(r"chosen: (?:k = (\d+) of (\d+) blocks|the one plan \([^)]*\))")
MEASURED = re.compile(r"measured speed-up ([\d.]+)x over the original \(95 % interval ([\d.]+)-([\d.]+)x")


def run(folder: Path, name: str, *args: str) -> str | None:
    """``dsprof ARGS``; its output saved as ``folder/name.txt``; None (and its last line printed) where it fails."""
    done = subprocess.run([*DSPROF, *args], capture_output=True, text=True)
    (folder / f"{name}.txt").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["(no output)"]
        print(f"  {name}: exit {done.returncode}: {last[0][:300]}", flush=True)
        return None
    return done.stdout


def exactness(name: str, plan_path: Path, options: dict, resolution: int) -> float:
    """The model ``name`` merged by the plan against its linearised original, float64, largest error over the largest
    output."""
    import dsprof
    from dsprof.merging.linearize import linearize_model
    from dsprof.records.plan import load_plan

    torch.manual_seed(0)
    warnings.simplefilter("ignore", dsprof.models.UnsupportedBlockWarning)  # `blocks` printed them already
    net = dsprof.ModelRef.of(name, options=options, resolution=resolution).build().eval()
    plan = load_plan(plan_path)
    merged = dsprof.merge(dsprof.ModelRef.of(net, name=name, options=options, resolution=resolution), plan).model
    linear = linearize_model(net, plan, input_size=(resolution, resolution)).double().eval()
    x = torch.randn(2, 3, resolution, resolution, dtype=torch.float64)
    with torch.no_grad():
        a, b = linear(x), merged.double().eval()(x)
    return float((a - b).abs().max() / a.abs().max())


def loop(name: str, out: Path, resolution: int, options: dict, timing: list[str], variants: list[str],
         backend: str = "torch") -> dict:
    folder = out / name.replace(":", "-")
    folder.mkdir(parents=True, exist_ok=True)
    model = ["--model", name, "--resolution", str(resolution)]
    where = ["--backend", backend]
    for key, value in options.items():
        model += [f"--{key.replace('_', '-')}"] if value is True else [f"--{key.replace('_', '-')}", str(value)]
    row: dict = {"model": name}
    print(f"{name} at {resolution} px", flush=True)
    blocks = run(folder, "blocks", "blocks", *model)
    found = re.search(r"^(\d+) blocks;", blocks or "", re.M)
    row["blocks"] = int(found.group(1)) if found else None
    measured_lut = run(folder, "measure", "measure", *model, "--spans", "2", "--calibrate", *where, *variants, *ONE,
                       *timing, "--resume", "--out", str(folder / "m"))
    if measured_lut is None:
        return {**row, "stopped": "measure"}
    count = re.search(r"^(\d+) workloads measured", measured_lut, re.M)
    row["workloads"] = int(count.group(1)) if count else None
    lut = folder / "lut.csv"
    if run(folder, "build-lut", "build-lut", str(folder / "m"), "-o", str(lut)) is None:
        return {**row, "stopped": "build-lut"}
    planned = run(folder, "plan", "plan", *model, "--lut", str(lut), *where, "--keep", "0.5", "--out", str(folder / "front.json"))
    if planned is None:
        return {**row, "stopped": "plan"}
    chosen = CHOSEN.search(planned)
    if chosen is None:
        return {**row, "stopped": "plan (no chosen line)"}
    # the speed-up's interval, as the front file holds it: a paired check is held to it (the latency's, which the
    # loop read before 2026-11-30, also holds the machine's drift between the LUT's runs and the check)
    k, n = chosen.groups(default="0")[:2]
    point = next(p for p in json.loads((folder / "front.json").read_text())["points"] if p["k"] == int(k))
    row.update(k=f"{k} of {n}", predicted=point["speedup"], low=point["speedup_low"], high=point["speedup_high"])
    plan_path = folder / "front.plan.json"
    if run(folder, "merge", "merge", *model, "--plan", str(plan_path), "--out", str(folder / "merged.pt")) is None:
        return {**row, "stopped": "merge"}
    checked = run(folder, "check", "measure", *model, "--plan", str(plan_path), *where,
                  "--model-variants", "original", "--variants", "none", *ONE, *(timing and [*timing, "--budget", "0.3"]), "--resume", "--out", str(folder / "check"))
    if checked is None:
        return {**row, "stopped": "measure --plan"}
    measured = MEASURED.search(checked)
    if measured is None:
        return {**row, "stopped": "measure --plan (no measured line)"}
    row.update(measured=float(measured.group(1)), measured_low=float(measured.group(2)),
               measured_high=float(measured.group(3)))
    row["inside"] = row["low"] <= row["measured"] <= row["high"]
    row["merge_error"] = exactness(name, plan_path, options, resolution)
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("models", nargs="+", help="timm model names (dsprof's with --zoo dsprof)")
    p.add_argument("--zoo", choices=("timm", "dsprof"), default="timm")
    p.add_argument("--default-timing", action="store_true", help="time as measure does by default, one thread")
    p.add_argument("--variants", default=None, help="measure's --variants (default: the backend's)")
    p.add_argument("--out", type=Path, required=True, help="a folder for every command's files and output")
    p.add_argument("--resolution", type=int, default=64)
    p.add_argument("--backend", default="torch", help="the runtime measure, plan and the check use (default torch)")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="a model option for every model (reparameterize=true)")
    args = p.parse_args()
    options = {}
    for item in args.option:
        key, value = item.split("=", 1)
        options[key] = True if value.lower() == "true" else value
    timing = [] if args.default_timing else QUICK
    variants = ["--variants", args.variants] if args.variants else []
    names = [f"timm:{m}" if args.zoo == "timm" else m for m in args.models]
    rows = [loop(m, args.out, args.resolution, options, timing, variants, args.backend) for m in names]
    (args.out / "rows.json").write_text(json.dumps(rows, indent=1))
    print("\n| model | blocks | workloads | k | predicted (95 %) | half-width | measured (95 %) | prediction's error | inside | "
          "merge error |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    checked = [r for r in rows if "stopped" not in r]
    for r in rows:
        if "stopped" in r:
            print(f"| {r['model']} | {r['blocks']} | | stopped at `{r['stopped']}` | | | | | | |")
            continue
        print(f"| {r['model']} | {r['blocks']} | {r['workloads']} | {r['k']} | {r['predicted']:.3f}x ({r['low']:.3f}-{r['high']:.3f}) | "
              f"±{100 * half_width(r):.1f} % | {r['measured']:.3f}x ({r['measured_low']:.3f}-{r['measured_high']:.3f}) | "
              f"{100 * error(r):+.1f} % | {'yes' if r['inside'] else 'no'} | {r['merge_error']:.1e} |")
    if checked:
        print(f"\n{len(checked)} of {len(rows)} models checked: {sum(r['inside'] for r in checked)} inside their speed-up's "
              f"95 % interval, {sum(abs(error(r)) <= 0.10 for r in checked)} within ±10 %; median error "
              f"{100 * statistics.median(abs(error(r)) for r in checked):.1f} %, median half-width "
              f"±{100 * statistics.median(half_width(r) for r in checked):.1f} % (the interval's, on the log scale)")


def error(row: dict) -> float:
    """The prediction's error against the paired check, relative."""
    return row["predicted"] / row["measured"] - 1


def half_width(row: dict) -> float:
    """The predicted interval's half-width on the log scale, relative: sqrt(high / low) - 1."""
    return (row["high"] / row["low"]) ** 0.5 - 1


if __name__ == "__main__":
    main()
