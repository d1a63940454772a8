"""Why is a block slow? One block's latency broken into its operators (issue #14).

`explain_block` times the block as a unit (the timing core, as `measure` does), profiles the same
calls per operator (``torch.profiler`` for PyTorch eager; for ``torch.compile`` the same profiler over the
kernels Inductor generated, each named after the operators it fused; ONNX Runtime's own profiler; OpenVINO's
per-layer performance counters, where a layer fused into another is listed as not run), and, for PyTorch eager,
times each operator alone (its module with the input it gets inside the block). The three sums side by side say
where the time goes:

* the profiler's per-operator sum matches the block: the operators are slow; the table says which;
* the block takes far longer than its operators timed alone: the time is lost *between* or *inside*
  parallel regions, e.g. OpenMP threads that wait for a thread another process has preempted
  (with the recorded CPU share far below 1), or a cold cache; the block is also timed on one
  thread to tell the two apart;
* for a compiler (torch.compile, OpenVINO), which operators it already fused: an activation fused into its
  convolution costs little, and removing it (what DepthShrinker does) saves little more than the merge itself.

Times in seconds; ``table`` and `format_explanation` show milliseconds.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd
import torch
from torch import nn

from ..device_context import COMPILE_MODES
from ..errors import UsageError
from ..merging.fold import fold_batchnorm
from ..models import block_module, find_blocks, first_conv_in_channels, input_size_of, ModelRef, nothing_to_merge
from .backends import BackendSettings, get_backend
from ..portable.cpu_share import CpuShare
from .runner import DEFAULT_CPU_THREADS, MODEL_KEYWORDS
from .._moved import moved_keywords
from .timing import TimingConfig, time_interleaved
from ..fields import plain
from ..io import atomic_write_text, read_json
from .backends.torch_compile import own_frame
from ..models.onnx_export import export_onnx
from .backends.openvino import OpenVINOBackend

__all__ = ["EXPLAIN_BACKENDS", "OPERATOR_COLUMNS", "BlockExplanation", "explain_block", "format_explanation",
           "load_explanation"]

#: Columns of `BlockExplanation.operators`: the operator, its input shape, calls per block call,
#: profiled self time per block call, and the operator timed alone (None where it has no module).
OPERATOR_COLUMNS = ("operator", "shape", "calls", "profiled_s", "alone_s")
_SMALL_SHARE = 0.01  # profiled operators below this share of the sum are shown as one row
_LEAVES = (nn.Conv2d, nn.Linear, nn.ReLU, nn.ReLU6, nn.SiLU, nn.Hardswish, nn.Hardsigmoid, nn.GELU, nn.Sigmoid,
           nn.BatchNorm2d, nn.AdaptiveAvgPool2d, nn.ZeroPad2d, nn.Dropout)


@dataclass
class BlockExplanation:
    """One block's latency and its operators (seconds per block call, batch ``batch``).

    ``block_s``: the block timed as a unit; ``profiled_sum_s``: the per-operator profile summed;
    ``alone_sum_s``: the operators timed one by one, summed; ``single_thread_s``: the block on one
    thread (when ``threads`` > 1); ``cpu_share``: CPU time the process got / what its threads
    could use while the block was timed; ``finding``: the reading in one sentence.
    """

    model: str
    block: str
    spec: str
    backend: str
    threads: int
    batch: int
    block_s: float
    profiled_sum_s: float
    alone_sum_s: float | None
    single_thread_s: float | None
    cpu_share: float | None
    switches_per_s: float | None
    load_avg_1m: float | None
    operators: pd.DataFrame = field(repr=False)
    finding: str = ""

    def to_json(self) -> str:
        """The explanation as JSON (the operators as a list of rows)."""
        data = asdict(self) | {"operators": self.operators.to_dict(orient="records")}
        return json.dumps(data, indent=1)

    def save(self, path: str | Path) -> Path:
        """Write `to_json` to ``path`` (``.explain.json`` by convention: `dsprof report` finds it there)."""
        return atomic_write_text(path, self.to_json() + "\n")


def load_explanation(path: str | Path) -> BlockExplanation:
    """Read a file written by `BlockExplanation.save`."""
    data = read_json(path, "block explanation", "give a file that `dsprof explain` wrote", error=UsageError)
    try:
        data["operators"] = pd.DataFrame(data["operators"], columns=list(OPERATOR_COLUMNS))
        return BlockExplanation(**data)
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise UsageError(f"{path}: not a block explanation written by `dsprof explain` ({plain(exc)})") from None


def _cpu_signals(fn, threads: int) -> tuple[Any, float | None, float | None]:
    """``fn()``, the share of the CPU time its ``threads`` threads could use that the process got (as `measure`
    records it: `CpuShare`), and the involuntary context switches a second."""
    with CpuShare(threads) as share:
        out = fn()
    return out, share.share, share.switches_per_s


def _time(fns: Mapping[str, Any], timing: TimingConfig) -> dict[str, float]:
    with torch.inference_mode():
        timed = time_interleaved(fns, timing)
    return {k: statistics.median(v.samples_s) for k, v in timed.items()}


def _leaf_calls(block: nn.Module, x: torch.Tensor) -> list[tuple[str, nn.Module, torch.Tensor]]:
    """Every leaf operator module that runs in the block, in order, with the input it gets there."""
    calls: list[tuple[str, nn.Module, torch.Tensor]] = []
    hooks = []
    for name, sub in block.named_modules():
        if isinstance(sub, _LEAVES):
            hooks.append(sub.register_forward_pre_hook(
                lambda m, args, name=name: calls.append((name, m, args[0].clone()))))
    try:
        with torch.inference_mode():
            block(x)
    finally:
        for h in hooks:
            h.remove()
    return calls


#: Kineto's log level (its ``KINETO_LOG_LEVEL``, read when the profiler first starts) above every level it prints at:
#: its own lines (``profiler_start``, and ``gpuGetDeviceCount failed`` on a machine without a GPU) are not the user's.
#: A level the user set stays theirs.
_KINETO_QUIET = "6"


def _profiler() -> tuple[Any, Any]:
    """(``ProfilerActivity``, ``profile``) of ``torch.profiler``, with Kineto quiet (`_KINETO_QUIET`)."""
    os.environ.setdefault("KINETO_LOG_LEVEL", _KINETO_QUIET)
    from torch.profiler import ProfilerActivity, profile

    return ProfilerActivity, profile


def _torch_profile(block: nn.Module, x: torch.Tensor, calls: int) -> pd.DataFrame:
    ProfilerActivity, profile = _profiler()

    with torch.inference_mode(), profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(calls):
            block(x)
    # The operators that take the time; the dispatch layers and bookkeeping go into one row.
    return _operator_rows(prof.key_averages(group_by_input_shape=True), calls, lambda key: key.startswith("aten::"))


#: The backends `explain_block` profiles (on the CPU).
EXPLAIN_BACKENDS = ("torch", "torch-compile", "onnxruntime", "openvino")
#: How OpenVINO's counters mark a layer that ran inside another one (fused), in `BlockExplanation.operators`.
FUSED = "fused, not run"


def _operator_rows(events: Any, calls: int, keep: Any, always: Any = lambda key: False) -> pd.DataFrame:
    """Per-operator rows of a ``torch.profiler`` ``key_averages`` (``keep(key)`` picks the events), the small
    ones (below `_SMALL_SHARE` of the sum) as one row, except those ``always(key)`` keeps on their own."""
    rows = []
    for e in events:
        if e.self_cpu_time_total <= 0 or not keep(e.key):
            continue
        shape = "x".join(str(d) for d in e.input_shapes[0]) if e.input_shapes and e.input_shapes[0] else ""
        rows.append({"operator": e.key, "shape": shape, "calls": e.count / calls,
                     "profiled_s": e.self_cpu_time_total * 1e-6 / calls, "alone_s": None})
    frame = pd.DataFrame(rows, columns=list(OPERATOR_COLUMNS))
    small = (frame.profiled_s < _SMALL_SHARE * frame.profiled_s.sum()) & ~frame.operator.map(always).astype(bool)
    if small.sum() > 1:
        rest = {"operator": f"(other {int(small.sum())} operators)", "shape": "", "calls": float(frame.calls[small].sum()),
                "profiled_s": float(frame.profiled_s[small].sum()), "alone_s": None}
        frame = pd.concat([frame[~small], pd.DataFrame([rest])], ignore_index=True)
    return frame


def _compiled_profile(block: nn.Module, x: torch.Tensor, calls: int, mode: str) -> pd.DataFrame:
    """The kernels ``torch.compile`` (``mode``) runs for ``block``: compiled apart from the timed module, with
    Inductor's kernel profiling on, and profiled over ``calls`` calls. Inductor names each generated kernel after the
    operators it fused (``cpp_fused_convolution_hardtanh_0``; ``triton_`` on CUDA); convolutions it leaves to a
    library show as their aten or mkldnn call."""
    from torch._inductor import config as inductor_config

    ProfilerActivity, profile = _profiler()

    compiled = torch.compile(own_frame(block), mode=mode, fullgraph=True)
    with inductor_config.patch({"cpp.enable_kernel_profile": True}), torch.inference_mode():
        compiled(x)  # compiles here, with the kernels' profiling records in
        for _ in range(3):
            compiled(x)
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            for _ in range(calls):
                compiled(x)
    generated = lambda key: "_fused_" in key or key.startswith("triton_")  # noqa: E731  (Inductor's own kernels)
    kernel = lambda key: generated(key) or key.startswith(("aten::", "mkldnn::"))  # noqa: E731
    return _operator_rows(prof.key_averages(group_by_input_shape=True), calls, kernel, always=generated)


def _openvino_profile(block: nn.Module, shape: tuple[int, ...], threads: int, calls: int, workdir: Path) -> pd.DataFrame:
    """OpenVINO's per-layer performance counters over ``calls`` calls: one row per layer of the compiled model,
    ``TYPE NAME [KERNEL]`` with its time, or ``TYPE NAME (fused, not run)`` for a layer the plugin ran inside
    another (an activation in its convolution)."""
    import openvino as ov


    backend = OpenVINOBackend(BackendSettings("openvino", threads=threads))
    compiled = backend.compile(export_onnx(block, shape, workdir / "block.onnx"), profiling=True)
    request = compiled.create_infer_request()
    request.set_input_tensor(ov.Tensor(np.random.default_rng(0).standard_normal(shape).astype(np.float32)))
    for _ in range(3):
        request.infer()
    times: dict[tuple[str, str, str, bool], float] = defaultdict(float)
    for _ in range(calls):
        request.infer()
        for layer in request.profiling_info:
            if layer.node_type in ("Parameter", "Result"):
                continue
            ran = str(layer.status).endswith("EXECUTED")
            times[(layer.node_type, layer.node_name, layer.exec_type, ran)] += layer.real_time.total_seconds()
    rows = [{"operator": f"{kind} {name} [{kernel}]" if ran else f"{kind} {name} ({FUSED})", "shape": "",
             "calls": 1.0 if ran else 0.0, "profiled_s": total / calls, "alone_s": None}
            for (kind, name, kernel, ran), total in times.items()]
    return pd.DataFrame(rows, columns=list(OPERATOR_COLUMNS))


def _fusion_note(e: "BlockExplanation") -> str | None:
    """What a compiler fused, in words (OpenVINO's layers run inside others, Inductor's fused kernels), or None."""
    ops = [str(o) for o in e.operators["operator"]]
    if e.backend == "openvino":
        fused = [o.split(" (")[0] for o in ops if o.endswith(f"({FUSED})")]
        ran = [o for o in ops if not o.endswith(f"({FUSED})")]
        if not fused:
            return f"OpenVINO ran every one of its {len(ran)} layers as a kernel of its own (nothing fused)"
        return (f"OpenVINO ran {len(ran)} kernels and fused {len(fused)} layers into them (not run on their own: "
                f"{', '.join(fused)})")
    if e.backend == "torch-compile":
        kernels = [o for o in ops if "_fused_" in o or o.startswith("triton_")]
        library = sorted({o for o in ops if "conv" in o and o not in kernels})
        if not kernels:
            return None
        return (f"Inductor generated {len(kernels)} kernel(s), named after the operators each fuses: "
                f"{', '.join(kernels)}" + (f"; convolutions through {', '.join(library)}" if library else ""))
    return None


def _onnxruntime_profile(block: nn.Module, shape: tuple[int, ...], threads: int, calls: int, workdir: Path) -> pd.DataFrame:
    import onnxruntime as ort


    path = export_onnx(block, shape, workdir / "block.onnx")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    options.log_severity_level = 3
    options.enable_profiling = True
    options.profile_file_prefix = str(workdir / "ort_profile")
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    feed = {"input": np.random.default_rng(0).standard_normal(shape).astype(np.float32)}
    for _ in range(3):  # warm-up calls, left out of the sums below
        session.run(None, feed)
    profile_file = session.end_profiling()
    options.profile_file_prefix = str(workdir / "ort_profile_timed")
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    for _ in range(calls):
        session.run(None, feed)
    profile_file = session.end_profiling()
    events = json.loads(Path(profile_file).read_text())
    per_node: dict[tuple[str, str], list[float]] = defaultdict(list)
    for e in events:
        if e.get("cat") == "Node" and str(e.get("name", "")).endswith("_kernel_time"):
            args = e.get("args", {})
            node = e["name"][: -len("_kernel_time")]
            shapes = args.get("input_type_shape") or [{}]
            first = next(iter(shapes[0].values()), []) if isinstance(shapes[0], dict) else []
            per_node[(f"{args.get('op_name', '?')} {node}", "x".join(map(str, first)))].append(e["dur"] * 1e-6)
    rows = [{"operator": op, "shape": shape, "calls": len(durs) / calls, "profiled_s": sum(durs) / calls, "alone_s": None}
            for (op, shape), durs in per_node.items()]
    return pd.DataFrame(rows, columns=list(OPERATOR_COLUMNS))


def _finding(e: BlockExplanation) -> str:
    """The reading of an explanation in one or two sentences (see the module docstring)."""
    ms = lambda v: f"{v * 1e3:.3f} ms"  # noqa: E731
    parts = e.alone_sum_s if e.alone_sum_s is not None else e.profiled_sum_s
    how = "timed alone" if e.alone_sum_s is not None else "profiled"
    ratio = e.block_s / parts if parts > 0 else float("nan")
    notes = []
    if ratio >= 1.5:
        notes.append(f"the block as a unit takes {ms(e.block_s)}, {ratio:.1f}x its operators {how} ({ms(parts)})")
    else:
        notes.append(f"the block ({ms(e.block_s)}) costs what its operators cost ({ms(parts)} {how})")
    if e.threads > 1 and e.single_thread_s is not None and e.single_thread_s < e.block_s / 1.5:
        notes.append(f"on one thread it takes {ms(e.single_thread_s)} ({e.block_s / e.single_thread_s:.1f}x less): its "
                     f"{e.threads} threads wait for each other in every parallel region")
    if e.cpu_share is not None and e.cpu_share < 0.8:
        notes.append(f"the process got {e.cpu_share:.0%} of the CPU its threads could use: other processes "
                     "preempt them")
    elif ratio >= 1.5:
        notes.append("the operators timed alone find their input in the cache; in the block each reads what the "
                     "previous one wrote")
    fusion = _fusion_note(e)
    if fusion:
        notes.append(fusion)
    ops = e.operators[e.operators["profiled_s"].notna()].sort_values("profiled_s", ascending=False)
    if len(ops):
        top = ops.iloc[0]
        notes.append(f"the largest operator is {top['operator']} on {top['shape'] or '?'} ({ms(top['profiled_s'])}, "
                     f"{top['profiled_s'] / e.profiled_sum_s:.0%} of the profile)")
    slow = ops[ops["operator"].str.contains("_slow_conv2d")]
    if len(slow):
        notes.append(f"{len(slow)} convolution(s) ran through PyTorch's fallback im2col path (aten::_slow_conv2d_forward, "
                     f"{ms(float(slow['profiled_s'].sum()))}) instead of oneDNN")
    return "; ".join(notes) + "."


def explain_block(
    model: str | nn.Module | ModelRef = "mobilenet_v2",
    block: str = "features.2",
    *,
    backend: str = "torch",
    threads: int | None = None,
    batch: int = 1,
    timing: TimingConfig = TimingConfig(budget_s=0.5),
    profile_calls: int = 20,
    **old: Any,
) -> BlockExplanation:
    """Explain one block's latency on the CPU: the block timed as a unit, its per-operator profile
    and its operators timed alone (see the module docstring). ``model`` is anything `ModelRef.of` takes (a
    `ModelRef` carries its name, options and resolution); ``block`` is the block's module name
    (`dsprof blocks` lists them); ``backend`` is one of `EXPLAIN_BACKENDS` (``torch-compile`` in its
    ``default`` mode); ``threads`` defaults to `DEFAULT_CPU_THREADS`. BatchNorm is folded, as in every timed
    module. The keywords of before (``name=``, ``model_options=``, ``resolution=``) still work for a release, with a
    `DeprecationWarning`."""
    moved = moved_keywords("dsprof.profiler.explain.explain_block", old, MODEL_KEYWORDS).get("model", {})
    if backend not in EXPLAIN_BACKENDS:
        raise UsageError(f"explain supports `backend=` {', '.join(EXPLAIN_BACKENDS)} on the CPU, not {backend!r}")
    threads = threads or DEFAULT_CPU_THREADS
    ref = ModelRef.of(model, **moved)
    label, net = ref.name, ref.build()
    net.eval()
    blocks = find_blocks(net)
    if not blocks:
        raise UsageError(f"{label}: {nothing_to_merge(net)}; there is no block to explain")
    found = [b for b in blocks if b.name == str(block)]
    if not found and str(block).isdigit() and int(block) < len(blocks):  # the index every table numbers it by
        found = [blocks[int(block)]]
    if not found:
        raise UsageError(f"no block named {block!r}; give a block's name or its index (0 to {len(blocks) - 1}): "
                         f"{', '.join(b.name for b in blocks)}")
    block = found[0].name
    spec = found[0].spec
    saved = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        folded = fold_batchnorm(net, torch.zeros(1, first_conv_in_channels(net), *input_size_of(net)))
        module = block_module(folded, block).eval()
        shape = (batch, spec.in_channels, spec.in_h, spec.in_w)
        x = torch.randn(shape, generator=torch.Generator().manual_seed(0))
        leaves = _leaf_calls(module, x)
        torch.set_num_threads(threads)
        with tempfile.TemporaryDirectory(prefix="dsprof-explain-") as tmp:
            prepared = get_backend(BackendSettings(backend, threads=threads)).prepare(module, shape, Path(tmp) / "block")
            block_s, share, switches = _cpu_signals(lambda: _time({"block": prepared.run}, timing)["block"], threads)
            prepared.close()
            if backend == "torch":
                ops = _torch_profile(module, x, profile_calls)
                alone = _time({f"{i}": (lambda m=m, h=h: m(h)) for i, (_, m, h) in enumerate(leaves)}, timing)
                alone_rows = pd.DataFrame([
                    {"operator": f"{type(m).__name__} {n}", "shape": "x".join(map(str, h.shape)), "calls": 1.0,
                     "profiled_s": None, "alone_s": alone[str(i)]} for i, (n, m, h) in enumerate(leaves)
                ], columns=list(OPERATOR_COLUMNS))
                alone_sum = float(sum(alone.values()))
            else:
                if backend == "onnxruntime":
                    ops = _onnxruntime_profile(module, shape, threads, profile_calls, Path(tmp))
                elif backend == "openvino":
                    ops = _openvino_profile(module, shape, threads, profile_calls, Path(tmp))
                else:
                    ops = _compiled_profile(module, x, profile_calls, COMPILE_MODES[0])
                alone_rows, alone_sum = pd.DataFrame(columns=list(OPERATOR_COLUMNS)), None
            single = None
            if threads > 1:
                torch.set_num_threads(1)
                one = get_backend(BackendSettings(backend, threads=1)).prepare(module, shape, Path(tmp) / "one")
                single = _time({"block": one.run}, timing)["block"]
                one.close()
    finally:
        torch.set_num_threads(saved)

    explanation = BlockExplanation(
        model=label, block=block, spec=spec.to_str(), backend=backend, threads=threads, batch=batch,
        block_s=block_s, profiled_sum_s=float(ops["profiled_s"].sum()), alone_sum_s=alone_sum,
        single_thread_s=single, cpu_share=share, switches_per_s=switches,
        load_avg_1m=os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        operators=pd.concat([ops, alone_rows], ignore_index=True) if len(alone_rows) else ops,
    )
    explanation.finding = _finding(explanation)
    return explanation


def format_explanation(e: BlockExplanation) -> str:
    """The explanation as text: one line per operator (profiled and alone, ms), the sums, the finding."""
    lines = [f"{e.model} {e.block} ({e.spec}), {e.backend}, {e.threads} thread(s), batch {e.batch}"]
    ops = e.operators
    width = max([len("operator")] + [len(str(o)) for o in ops["operator"]])
    lines.append(f"{'operator':<{width}}  {'input shape':<16}  {'calls':>5}  {'profiled ms':>11}  {'alone ms':>9}")
    for _, r in ops.iterrows():
        prof = "" if pd.isna(r["profiled_s"]) else f"{r['profiled_s'] * 1e3:.3f}"
        alone = "" if r["alone_s"] is None or pd.isna(r["alone_s"]) else f"{r['alone_s'] * 1e3:.3f}"
        lines.append(f"{r['operator']:<{width}}  {str(r['shape'])[:16]:<16}  {r['calls']:>5.1f}  {prof:>11}  {alone:>9}")
    lines.append(f"block timed as a unit: {e.block_s * 1e3:.3f} ms; operators profiled: {e.profiled_sum_s * 1e3:.3f} ms"
                 + (f"; operators timed alone: {e.alone_sum_s * 1e3:.3f} ms" if e.alone_sum_s is not None else "")
                 + (f"; the block on 1 thread: {e.single_thread_s * 1e3:.3f} ms" if e.single_thread_s is not None else ""))
    signals = []
    if e.cpu_share is not None:
        signals.append(f"CPU share {e.cpu_share:.0%} of {e.threads} thread(s)")
    if e.switches_per_s is not None:
        signals.append(f"{e.switches_per_s:.0f} preemptions/s")
    if e.load_avg_1m is not None:
        signals.append(f"load average {e.load_avg_1m:.1f}")
    if signals:
        lines.append("while timing the block: " + ", ".join(signals))
    lines.append(f"finding: {e.finding}")
    return "\n".join(lines)
