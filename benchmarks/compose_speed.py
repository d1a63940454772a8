"""How long the exact merge takes to compose a dense convolution after a dense one.

`dsprof.merging.algebra.compose_convs` composes a dense convolution after a dense one in float64 (the merge is exact
to float64 before it is cast back). Until d71da05 it did so with one float64 ``conv2d`` (W1 as a batch, W2 flipped);
now with one matrix product per tap of W2, which runs on BLAS. This script times both ways on the same pairs, in one
run, alternating, and checks that they give the same kernel (the conv2d way is written out here as the reference).

    python benchmarks/compose_speed.py --threads 1

Pairs: ResNet-18's 3x3-3x3 basic blocks at 64 channels and at 256 to 512 (the first strided), VGG-11's 3x3-3x3 at 512
(a span of two), and a 5x5 composite (two 3x3 merged) after a 3x3 at 256 (a span of three). Random float64 weights.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from dsprof.merging.algebra import LinearConv, compose_convs

PAIRS = {  # name: (in, mid, out channels, first kernel, second kernel, first stride)
    "ResNet-18 layer1 (64, 3x3 after 3x3)": (64, 64, 64, 3, 3, 1),
    "ResNet-18 layer4.0 (256 to 512, 3x3 /2 then 3x3)": (256, 512, 512, 3, 3, 2),
    "VGG-11 span (512, 3x3 after 3x3)": (512, 512, 512, 3, 3, 1),
    "span of three (256, 3x3 after 5x5)": (256, 256, 256, 5, 3, 1),
}


def conv2d_way(first: LinearConv, second: LinearConv) -> torch.Tensor:
    """The composite kernel of the code before d71da05: a full correlation as one float64 conv2d."""
    s1 = first.stride
    k2 = second.kernel_size
    ph, pw = (k2[0] - 1) * s1[0], (k2[1] - 1) * s1[1]
    w1, w2 = first.weight.double(), second.weight.double()
    return F.conv2d(F.pad(w1.transpose(0, 1), (pw, pw, ph, ph)), w2.flip(2, 3), dilation=s1).transpose(0, 1)


def pair(cin: int, mid: int, cout: int, k1: int, k2: int, stride: int) -> tuple[LinearConv, LinearConv]:
    g = torch.Generator().manual_seed(0)
    first = LinearConv(torch.randn(mid, cin, k1, k1, generator=g, dtype=torch.float64),
                       torch.randn(mid, generator=g, dtype=torch.float64), (stride, stride), (k1 // 2,) * 4)
    second = LinearConv(torch.randn(cout, mid, k2, k2, generator=g, dtype=torch.float64),
                        torch.randn(cout, generator=g, dtype=torch.float64), (1, 1), (k2 // 2,) * 4)
    return first, second


def seconds(fn, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5, help="alternating timings of each way per pair")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"threads {args.threads}; {args.repeats} alternating repeats; medians\n")
    print("| pair | conv2d (before) | matrix products (now) | speed-up | largest difference |")
    print("| --- | --- | --- | --- | --- |")
    for name, shape in PAIRS.items():
        first, second = pair(*shape)
        old, new = [], []
        for _ in range(args.repeats):
            old += seconds(lambda: conv2d_way(first, second), 1)
            new += seconds(lambda: compose_convs(first, second), 1)
        reference, ours = conv2d_way(first, second), compose_convs(first, second).weight
        diff = float((reference - ours).abs().max() / reference.abs().max())
        a, b = statistics.median(old), statistics.median(new)
        print(f"| {name} | {a * 1e3:.0f} ms | {b * 1e3:.0f} ms | {a / b:.1f}x | {diff:.1e} (relative) |")


if __name__ == "__main__":
    main()
