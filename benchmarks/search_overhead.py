"""What do the activation gates cost? One training step with gates against without (issue #6).

Same model, same batch, same optimizer; the steps alternate (plain, gated, plain, ...) so that drifts of
the machine's speed hit both alike; the ratio of medians is reported. Target: <= 1.15x.

    .venv/bin/python benchmarks/search_overhead.py                                  # MobileNetV2-1.0, 96 px, batch 16, CPU
    .venv/bin/python benchmarks/search_overhead.py --device cuda --resolution 224 --batch 128
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from dsprof.models import get_model
from dsprof.search import gate_model, latency_penalty, mac_savings


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--width", type=float, default=1.0)
    ap.add_argument("--resolution", type=int, default=96)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--keep", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    torch.manual_seed(0)
    plain = get_model("mobilenet_v2", width=args.width, resolution=args.resolution).to(device).train()
    weights = mac_savings(plain).weights.to(device)
    gated = gate_model(plain, args.keep).to(device).train()
    x = torch.randn(args.batch, 3, args.resolution, args.resolution, device=device)
    y = torch.randint(0, 1000, (args.batch,), device=device)

    def stepper(model, gates):
        opt = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9)

        def step() -> float:
            sync()
            t0 = time.perf_counter()
            loss = F.cross_entropy(model(x), y)
            if gates is not None:
                loss = loss + 1e-3 * latency_penalty(gates.scores, weights)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sync()
            return time.perf_counter() - t0

        return step

    runs = {"plain": stepper(plain, None), "gated": stepper(gated, gated.gates)}
    for f in runs.values():  # warm-up
        f(), f()
    samples: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(args.rounds):
        for k, f in runs.items():
            samples[k].append(f())
    med = {k: statistics.median(v) for k, v in samples.items()}
    ratio = med["gated"] / med["plain"]
    print(f"mobilenet_v2 width {args.width}, {args.resolution} px, batch {args.batch}, {device}, "
          f"{torch.get_num_threads()} threads, {args.rounds} rounds")
    for k in runs:
        q = statistics.quantiles(samples[k], n=4)
        print(f"  {k:<6} median {med[k] * 1e3:8.1f} ms per step (IQR {(q[2] - q[0]) * 1e3:.1f} ms)")
    print(f"  gated / plain = {ratio:.3f}x (target <= 1.15x): {'ok' if ratio <= 1.15 else 'ABOVE TARGET'}")


if __name__ == "__main__":
    main()
