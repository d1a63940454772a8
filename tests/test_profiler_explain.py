"""`explain_block` and `dsprof explain` on MobileNetV2's features.2 (16 -> 96 -> 24, stride 2), real timing.

Expected shapes come from the architecture: at 64 x 64 input the stem halves to 32 x 32 and
features.1 keeps it, so features.2 reads 16 x 32 x 32, expands to 96 x 32 x 32 and its stride-2
depthwise conv makes 96 x 16 x 16. Where a test reads features.2 alone, the model is `TINY`: MobileNetV2 with one
block a stage, whose stem, features.1 and features.2 are the full model's (each of these blocks the first of its
stage), so features.2 is the same block at the same input, without building the 14 blocks after it. The full model
stays where a test reads its list of blocks.
"""

import json
import os
import subprocess
import sys
import time

import pytest

from dsprof.cli import main
from dsprof.models import ModelRef
from dsprof.profiler import TimingConfig
from dsprof.portable.cpu_share import CpuShare
from dsprof.profiler.explain import _cpu_signals, explain_block, format_explanation, load_explanation

pytestmark = pytest.mark.usefixtures("one_thread")
QUICK = TimingConfig(warmup_s=0.0, warmup_min_iters=2, warmup_max_s=0.05, first_warmup_s=0.0,
                     min_samples=3, max_samples=5, budget_s=0.02, min_sample_s=0.0)
TINY = ModelRef.of("mobilenet_v2", options={"depths": [1] * 7}, resolution=64)  # see the module docstring
TINY_ARGS = ["--depths", "1,1,1,1,1,1,1", "--resolution", "64"]
# `QUICK` on the command line: no test of `dsprof explain` reads how fast the block ran, only what it printed and wrote
# (without --max-warmup the first workload warms up for 0.5 s at least)
QUICK_ARGS = ["--warmup", "0", "--max-warmup", "0.05", "--min-samples", "3", "--max-samples", "5", "--budget", "0.02",
              "--min-sample-time", "0"]


def test_the_keywords_of_before_name_the_one_model_reference_with_a_warning():
    with pytest.warns(DeprecationWarning, match=r"explain_block\(resolution=\) is now .*explain_block\(model=ModelRef.of\(resolution=\)\)"):
        e = explain_block("mobilenet_v2", "features.2", resolution=64, timing=QUICK, profile_calls=2)
    # the same block as through the reference: its input 16 x 32 x 32 at 64 px (the module docstring)
    assert e.spec.startswith("inverted_residual(cin=16,hidden=96,cout=24,k=3,s=2") and "in=32x32" in e.spec
    with pytest.raises(TypeError, match="model_option"):
        explain_block("mobilenet_v2", "features.2", model_option={})


def test_a_block_is_named_by_its_name_or_the_index_every_table_gives_it():
    # a new user's `dsprof explain --block 13` was refused, where every table numbers the blocks 0, 1, 2...
    e = explain_block(ModelRef.of("mobilenet_v2", resolution=64), 1, timing=QUICK, profile_calls=2)
    assert e.spec.startswith("inverted_residual(cin=16,hidden=96,cout=24,k=3,s=2")  # block 1 is features.2
    from dsprof.errors import UsageError
    with pytest.raises(UsageError, match=r"no block named '17'; give a block's name or its index \(0 to 16\): "
                                         r"features.1, features.2"):
        explain_block(ModelRef.of("mobilenet_v2", resolution=64), "17", timing=QUICK)


def test_torch_operators_of_features_2(tmp_path):
    e = explain_block(TINY, "features.2", timing=QUICK, profile_calls=3)
    alone = e.operators[e.operators.alone_s.notna()]
    # the leaf operators in execution order, each with the input it gets inside the block
    assert list(alone.operator) == ["Conv2d conv.0.0", "ReLU6 conv.0.2", "Conv2d conv.1.0", "ReLU6 conv.1.2", "Conv2d conv.2"]
    assert list(alone["shape"]) == ["1x16x32x32", "1x96x32x32", "1x96x32x32", "1x96x16x16", "1x96x16x16"]
    assert (alone.alone_s > 0).all()
    assert e.alone_sum_s == pytest.approx(float(alone.alone_s.sum()), rel=1e-12)
    profiled = e.operators[e.operators.profiled_s.notna()]
    assert any("conv" in op for op in profiled.operator)  # torch.profiler saw the convolutions
    assert e.profiled_sum_s == pytest.approx(float(profiled.profiled_s.sum()), rel=1e-12)
    assert e.block_s > 0 and e.threads == 1 and e.single_thread_s is None
    assert e.spec.startswith("inverted_residual(cin=16,hidden=96,cout=24,k=3,s=2")
    text = format_explanation(e)
    assert "block timed as a unit" in text and "finding:" in text and "operators timed alone" in text
    path = e.save(tmp_path / "f2.explain.json")
    back = load_explanation(path)
    assert back.block_s == e.block_s and list(back.operators.operator) == list(e.operators.operator)


def test_onnxruntime_profile_of_features_2():
    e = explain_block(TINY, "features.2", backend="onnxruntime", timing=QUICK, profile_calls=3)
    convs = e.operators[e.operators.operator.str.startswith("Conv")]
    assert len(convs) == 3  # ONNX Runtime fuses each Clip into its Conv: the block's three convolutions remain
    assert "1x16x32x32" in set(convs["shape"])
    assert (convs.calls == 1).all() and (convs.profiled_s > 0).all()
    assert e.alone_sum_s is None and "profiled" in e.finding


def test_cli_explain(tmp_path, capsys):
    out = tmp_path / "f2.explain.json"
    assert main(["explain", "--block", "features.2", *TINY_ARGS, *QUICK_ARGS, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "features.2" in text and "finding:" in text
    assert json.loads(out.read_text())["block"] == "features.2"
    assert main(["explain", "--block", "features.99", *TINY_ARGS]) == 2
    assert "features.2" in capsys.readouterr().err  # the error lists the blocks there are


def test_explain_prints_none_of_kinetos_own_lines(tmp_path):
    """The PyTorch profiler's C++ side (Kineto) prints its start and stop, and on a machine without a GPU "gpuGetDeviceCount
    failed", to the process's stderr: a fresh process shows whether any reaches the user."""
    env = {k: v for k, v in os.environ.items() if k != "KINETO_LOG_LEVEL"}
    done = subprocess.run([sys.executable, "-m", "dsprof", "explain", "--block", "features.2", *TINY_ARGS, *QUICK_ARGS],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "aten::" in done.stdout  # profiled
    assert [line for line in done.stderr.splitlines()
            if "profiler_start" in line or "gpuGetDeviceCount" in line or "ActivityProfiler" in line] == []


@pytest.mark.openvino
def test_openvino_counters_show_which_layers_it_fused():
    e = explain_block(TINY, "features.2", backend="openvino", timing=QUICK, profile_calls=3)
    ops = e.operators
    # features.2: a 1x1 expansion, a 3x3 depthwise and a 1x1 projection convolution; ReLU6 (ONNX Clip, OpenVINO
    # Clamp) after the first two. OpenVINO's CPU plugin runs an activation inside the convolution before it (a
    # post-op): its counters list the Clamp layers as not run
    convs = ops[ops.operator.str.match(r"(Group)?Convolution ")]
    assert len(convs) == 3 and convs.operator.str.startswith("GroupConvolution ").sum() == 1
    assert (convs.calls == 1).all() and (convs.profiled_s > 0).all()
    clamps = ops[ops.operator.str.startswith("Clamp ")]
    assert len(clamps) == 2 and clamps.operator.str.endswith("(fused, not run)").all()
    assert (clamps.calls == 0).all() and (clamps.profiled_s == 0).all()
    assert "OpenVINO ran" in e.finding and "fused 2 layers" in e.finding
    assert e.profiled_sum_s == pytest.approx(float(ops.profiled_s.sum()), rel=1e-12)
    assert e.backend == "openvino" and e.alone_sum_s is None


def test_torch_compile_kernels_are_named_after_what_they_fuse():
    e = explain_block(TINY, "features.2", backend="torch-compile", timing=QUICK,
                      profile_calls=3)
    kernels = [o for o in e.operators.operator if "cpp_fused_" in o]  # Inductor's generated C++ kernels
    assert kernels and f"Inductor generated {len(kernels)} kernel(s)" in e.finding
    assert e.profiled_sum_s == pytest.approx(float(e.operators.profiled_s.sum()), rel=1e-12)
    assert e.backend == "torch-compile" and e.block_s > 0


# -- the CPU share: one reading (portable/cpu_share.py) for `measure`, `explain` and the bundle runner (issue #44) --

def test_the_cpu_share_is_cpu_time_over_what_the_threads_could_use():
    ticks = {"cpu": iter([10.0, 13.0]), "wall": iter([100.0, 102.0]), "switches": iter([50, 70])}
    with CpuShare(4, cpu_clock=lambda: next(ticks["cpu"]), wall_clock=lambda: next(ticks["wall"]),
                  switches=lambda: next(ticks["switches"])) as share:
        pass
    # worked by hand: 3 s of CPU time in 2 s of wall time, of the 4 x 2 = 8 s four threads could use
    assert (share.cpu_s, share.wall_s, share.share, share.switches_per_s) == (3.0, 2.0, 0.375, 10.0)
    assert share.reading() == {"process_cpu_share": 0.375, "involuntary_switches_per_s": 10.0}
    with CpuShare(1, cpu_clock=lambda: 5.0, wall_clock=lambda: 7.0, switches=lambda: None) as still:
        pass  # no time passed, no resource module: nothing to say
    assert still.share is None and still.switches_per_s is None and still.reading() == {}
    with pytest.raises(ValueError, match="threads is at least 1"):
        CpuShare(0)


def test_explain_reads_the_share_of_all_its_threads():
    """`explain` divides by its thread count as `measure` does (it did not: one busy thread read as 100 % of four)."""
    def busy():  # one Python thread, busy for 0.2 s of wall time: it can get at most one core
        end = time.perf_counter() + 0.2
        while time.perf_counter() < end:
            pass
        return "done"

    out, share, switches = _cpu_signals(busy, 4)
    assert out == "done" and 0 < share <= 0.25 + 0.02  # at most 1 of the 4 threads' cores (and the clocks' rounding)
    assert switches is None or switches >= 0
    _, alone, _ = _cpu_signals(busy, 1)
    assert 0 < alone <= 1.02
