"""A model with nothing for DepthShrinker to merge says so in one line that fits it (issue #47, item 5), through
`dsprof blocks`, `dsprof measure`, `dsprof plan` and the API.

The models (tests/models/nothing.py) are read by hand: ``mlp`` has no Conv2d at all (Flatten, two Linear);
``one_conv`` one 3x3 convolution and a Linear classifier; ``pooled`` three 3x3 convolutions, each followed by BatchNorm,
ReLU and a max-pool, so no convolution feeds another. None of them may hear about convolutions that "do not form a
chain" (the words a model with unchained convolutions got before, an MLP included).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch
from torch import nn

import dsprof
from cli_run import dsprof_here
from dsprof.models import ModelRef, NothingToMergeWarning, UnsupportedBlockWarning, discover_blocks
from dsprof.profiler import BackendSettings
from dsprof.profiler.timing import TimingConfig
from models import nothing

FILE = str(Path(__file__).parent / "models" / "nothing.py")
FAST = TimingConfig(warmup_s=0.0, warmup_min_iters=1, warmup_max_s=0.01, first_warmup_s=0.0,
                    min_samples=3, max_samples=4, budget_s=0.02, min_sample_s=0.0)
FAST_FLAGS = ("--threads", "1", "--warmup", "0", "--max-warmup", "0.05", "--budget", "0.02", "--min-samples", "3", "--max-samples", "4",
              "--min-sample-time", "0")
WORDS = {  # what each model is told, read from its architecture
    "mlp": "no convolution: nothing for DepthShrinker to merge",
    "one_conv": "one convolution (0) and no other: nothing for DepthShrinker to merge",
    "pooled": "no two convolutions in a row (convolution 0: followed by MaxPool2d 3 (_3)): nothing for DepthShrinker to merge",
}


@pytest.mark.parametrize("factory", sorted(WORDS))
def test_discovery_says_why_in_words_that_fit(factory):
    found = discover_blocks(getattr(nothing, factory)().eval(), (32, 32))
    assert found.blocks == [] and found.refusals == []  # nothing looked like a block: no refusal either
    assert found.nothing == WORDS[factory]


def test_a_model_with_a_block_has_nothing_to_say():
    net = nn.Sequential(nn.Conv2d(3, 8, 1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU()).eval()
    found = discover_blocks(net, (16, 16))
    assert len(found.blocks) == 1 and found.nothing is None


def test_every_candidate_refused_is_said_with_the_first_reason():
    """Two convolutions closed by a skip path that pools (ResNet-D's form, refused): the one candidate refused."""
    found = discover_blocks(nothing.PooledSkip().eval(), (16, 16))
    assert found.blocks == [] and len(found.refusals) == 1
    assert found.nothing == (
        "no block DepthShrinker can merge: the one candidate, (model), is refused: its skip path (AvgPool2d -> Conv2d) is "
        "neither the identity nor a convolution with an optional BatchNorm, so the block cannot merge into one convolution; "
        "its activations stay")


@pytest.mark.parametrize("factory", sorted(WORDS))
def test_blocks_command_says_it_in_one_line(factory):
    out = dsprof_here("blocks", "--model-file", f"{FILE}:{factory}", "--resolution", "32")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [f"file:nothing:{factory}: {WORDS[factory]}"]
    assert out.stderr == ""  # no refusal: nothing looked like a block


def test_measure_and_plan_of_an_mlp_from_the_command_line(tmp_path):
    out = dsprof_here("measure", "--model-file", f"{FILE}:mlp", "--resolution", "32", *FAST_FLAGS, "--out",
                      tmp_path / "m", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    said = [line for line in out.stderr.splitlines() if line.startswith("warning:") and "contended" not in line]
    assert said == [f"warning: file:nothing:mlp: {WORDS['mlp']}; measured as a whole model"]
    assert "model: file:nothing:mlp" in out.stdout  # the whole model was timed
    assert dsprof_here("build-lut", tmp_path / "m", "-o", tmp_path / "lut.csv").returncode == 0
    out = dsprof_here("plan", "--model-file", f"{FILE}:mlp", "--resolution", "32", "--lut", tmp_path / "lut.csv",
                      cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        f"dsprof plan: error: file:nothing:mlp: {WORDS['mlp']}; there is no plan to choose, only the whole model to time"]


def test_measure_an_mlp_module_from_the_api_at_the_resolution_asked(tmp_path):
    """An MLP of 32x32 inputs cannot run at 224 px: measure traces it at the resolution it is given."""
    torch.manual_seed(0)
    net = nothing.mlp(resolution=32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        measured = dsprof.measure(ModelRef.of(net, name="mlp", resolution=32), settings=BackendSettings(threads=1),
                                  timing=FAST, out=tmp_path, progress=False)
    ours = [w for w in caught if issubclass(w.category, (NothingToMergeWarning, UnsupportedBlockWarning))]
    assert [str(w.message) for w in ours] == [f"mlp: {WORDS['mlp']}; measured as a whole model"]
    assert not [w for w in caught if issubclass(w.category, DeprecationWarning) and "dsprof." in str(w.message)]
    assert not any("flops_matched" in str(w.message) for w in caught)
    models = [m for m in measured.run.measurements if m.scope == "model"]
    assert [(m.name, m.variant, m.input_shape) for m in models] == [("mlp", "original", (1, 3, 32, 32))]
    assert models[0].macs == 3 * 32 * 32 * 64 + 64 * 10  # the two Linear layers, one image


MERGE_WORDS = "there is no plan to merge it by, only the whole model to time"


@pytest.mark.parametrize("plan", [None, "mbv2-ds-a"])
def test_merge_of_an_mlp_from_the_command_line_says_why_in_one_line(tmp_path, plan):
    """No plan, or another model's: the MLP is told it has nothing to merge, not to find "a plan for" it (issue #44)."""
    given = ("--plan", plan) if plan else ()
    out = dsprof_here("merge", "--model-file", f"{FILE}:mlp", "--resolution", "32", *given, "--out",
                      tmp_path / "m.pt", cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [f"dsprof merge: error: file:nothing:mlp: {WORDS['mlp']}; {MERGE_WORDS}"]
    assert not (tmp_path / "m.pt").exists()


def test_merge_of_an_mlp_module_from_the_api_says_why(tmp_path):
    mlp = ModelRef.of(nothing.mlp(resolution=32), name="mlp", resolution=32)
    empty = tmp_path / "empty.json"
    empty.write_text('{"model": "mlp", "keep": []}')
    for plan in ("mbv2-ds-a", empty):
        with pytest.raises(dsprof.errors.UsageError) as caught:
            dsprof.merge(mlp, plan)
        assert str(caught.value) == f"mlp: {WORDS['mlp']}; {MERGE_WORDS}"


def test_merge_of_a_model_with_blocks_still_names_the_plan_s_model():
    """The line is for models without a block only: one_conv's sibling with a block keeps the plan's refusal."""
    net = nn.Sequential(nn.Conv2d(3, 8, 1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU()).eval()
    with pytest.raises(dsprof.errors.PlanError, match=r"^mbv2-ds-a is for model 'mobilenet_v2', not 'pair'"):
        dsprof.merge(ModelRef.of(net, name="pair", resolution=16), "mbv2-ds-a")
