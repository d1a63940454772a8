"""Activation search and fine-tuning (issue #6): gates, objective, search, fine-tune, merge, baselines."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
from cli_run import dsprof_here
from conftest import randomise_bn

from dsprof.lut.schema import GROUP_COLUMNS
from dsprof.lut import LUT, SCHEMA, MergeChoice
from dsprof.merging import linearize_block, load_merged, merge_linearized
from dsprof.errors import UsageError
from dsprof.records.plan import Plan
from dsprof.models import ModelRef, count_macs, find_blocks, get_model
from dsprof.search import (
    GateSettings,
    TrainConfig,
    TrainRun,
    block_weights,
    digits,
    finetune,
    gate_model,
    latency_penalty,
    layer_prune,
    random_keep,
    resolve_k,
    search,
    ungate,
)
from dsprof.search.gates import GatedActivation

TINY = {"width": 0.35, "depths": [1] * 7}
TINY_ARGS = ["--width", "0.35", "--depths", "1,1,1,1,1,1,1"]
RES = 32
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def tiny(seed: int = 0, num_classes: int = 10):
    torch.manual_seed(seed)
    return randomise_bn(get_model("mobilenet_v2", resolution=RES, num_classes=num_classes, **TINY), seed)


# -- gates ---------------------------------------------------------------------------------------


def test_resolve_k_counts_and_fractions():
    assert resolve_k(7, 17) == 7
    assert resolve_k(0.4, 17) == 7  # 6.8 -> 7
    assert resolve_k(1.0, 17) == 17 and resolve_k(0, 17) == 0
    with pytest.raises(ValueError, match="0..17"):
        resolve_k(18, 17)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        resolve_k(1.5, 17)


@pytest.mark.parametrize("k", [0, 1, 3, 6, 7])
def test_gates_keep_exactly_k(k):
    gated = gate_model(tiny(), k)
    gates = gated.gates
    for seed in range(5):
        gates.scores.data = torch.randn(7, generator=torch.Generator().manual_seed(seed))
        keep = gates.keep()
        assert sum(keep) == k
        top = set(torch.topk(gates.scores.detach(), k).indices.tolist()) if k else set()
        assert {i for i, v in enumerate(keep) if v} == top
        # the forward pass uses exactly that mask: one gate value per block, binary
        seen = {}
        for m in gated.modules():
            if isinstance(m, GatedActivation):
                m.register_forward_hook(lambda mod, a, o: seen.__setitem__(mod.index, float(mod.gates.current[mod.index].detach())))
        gated(torch.randn(2, 3, RES, RES))
        assert [seen[i] for i in range(7)] == [float(v) for v in keep]


def test_all_kept_is_the_original_and_ungate_restores_it():
    model = tiny().eval()
    gated = gate_model(model, 7).eval()
    x = torch.randn(3, 3, RES, RES)
    torch.testing.assert_close(gated(x), model(x), rtol=0, atol=0)
    plain = ungate(gated)
    assert set(plain.state_dict()) == set(model.state_dict())
    torch.testing.assert_close(plain(x), model(x), rtol=0, atol=0)


def test_gate_off_is_the_identity_and_stem_head_stay():
    model = tiny().eval()
    gated = gate_model(model, 0).eval()
    n_gated = sum(isinstance(m, GatedActivation) for m in gated.modules())
    assert n_gated == 1 + 2 * 6  # depthwise-separable block: 1 activation; inverted residual: 2
    stem_act, head_act = gated.model.features[0][2], gated.model.features[-1][2]
    assert not isinstance(stem_act, GatedActivation) and not isinstance(head_act, GatedActivation)
    act = next(m for m in gated.modules() if isinstance(m, GatedActivation))
    x = torch.randn(2, 16, 5, 5) * 10
    act.gates.refresh()
    torch.testing.assert_close(act(x), x, rtol=0, atol=0)


def test_straight_through_gradient_reaches_every_score():
    gated = gate_model(tiny(), 3).train()
    gated.gates.scores.data = torch.tensor([3.0, 2.0, 1.0, 0.5, 0.4, 0.3, 0.2])
    x = torch.randn(4, 3, RES, RES)
    gated(x).square().sum().backward()
    grad = gated.gates.scores.grad
    assert grad is not None and torch.all(grad != 0), grad  # kept and removed blocks alike

    # on one gate: d/dm [m act(x) + (1 - m) x] . g = sum((act(x) - x) * g), the same at m = 0 and m = 1
    act = next(m for m in gated.modules() if isinstance(m, GatedActivation))
    g = torch.randn(2, 16, 6, 6)
    x = torch.randn(2, 16, 6, 6) * 8
    for value in (0.0, 1.0):
        act.gates.scores.grad = None
        act.gates.scores.data[act.index] = 10.0 if value else -10.0
        act.gates.refresh()
        (act(x) * g).sum().backward()
        expected = ((torch.clamp(x, 0, 6) - x) * g).sum()
        torch.testing.assert_close(act.gates.scores.grad[act.index], expected, rtol=1e-5, atol=1e-4)


def test_fast_clamp_gate_equals_the_generic_form():
    model = tiny().double().train()
    x = torch.randn(4, 3, RES, RES, dtype=torch.float64)
    grads = []
    for generic in (False, True):
        gated = gate_model(model, 3)
        gated.gates.scores.data = torch.tensor([3.0, 2, 1, 0.5, 0.4, 0.3, 0.2], dtype=torch.float64)
        if generic:  # the lerp form every activation type can use
            for m in gated.modules():
                if isinstance(m, GatedActivation):
                    m._clamp = None
        torch.manual_seed(1)  # the classifier's dropout
        out = gated(x)
        out.square().sum().backward()
        grads.append((out.detach(), gated.gates.scores.grad.clone(), gated.model.features[2].block.conv[0][0].weight.grad.clone()))
    for fast, generic in zip(*grads):
        torch.testing.assert_close(fast, generic, rtol=1e-12, atol=1e-12)


# -- objective -----------------------------------------------------------------------------------


def _hand_made_lut(path: Path, model, costly: int) -> LUT:
    """One device context; every block saves 0.5 ms when merged, block ``costly`` 100x as much."""
    rows = []
    for i, b in enumerate(find_blocks(model, (RES, RES))):
        scale = 100.0 if i == costly else 1.0
        for variant, median in (("original", 1e-3 * scale), ("merged", 0.5e-3 * scale)):
            rows.append({
                "schema": SCHEMA, "env_id": "handmade0001", "device_name": "test device", "device": "cpu",
                "backend": "torch", "dtype": "fp32", "layout": "nchw", "batch": 1, "threads": 1, "compile": False,
                "scope": "block", "workload": b.spec.to_str(), "variant": variant, "median_s": median,
                "iqr_s": 0.0, "n_samples": 10, "noisy": False, "sources": "hand-made", **GROUP_COLUMNS,
            })
    lut = LUT(pd.DataFrame(rows), "hand-made")
    lut.save(path)
    return lut


def test_lut_weights_and_penalty_sign(tmp_path):
    model = tiny()
    lut = _hand_made_lut(tmp_path / "lut.csv", model, costly=4)
    bw = block_weights(model, lut=lut, input_size=(RES, RES))
    assert bw.unit == "s"
    assert bw.savings[4] == pytest.approx(0.05) and bw.savings[0] == pytest.approx(0.5e-3)
    w = bw.weights
    assert float(w[4] / w[0]) == pytest.approx(100.0, rel=1e-6)
    assert float(w.mean()) == pytest.approx(1.0, rel=1e-6)
    scores = torch.ones(7, requires_grad=True)
    latency_penalty(scores, w).backward()
    assert int(scores.grad.argmax()) == 4  # gradient descent lowers the costly block's score fastest


def test_mac_weights_are_mac_savings():
    model = tiny()
    bw = block_weights(model, input_size=(RES, RES))
    assert bw.unit == "macs"
    # the first (depthwise-separable) block gains MACs when merged: the MACs rule leaves it unmerged, so linearising
    # it saves nothing ...
    assert bw.savings[0] == 0
    assert float(bw.weights[0]) == 0.0  # ... and the decay leaves it alone
    assert all(s > 0 for s in bw.savings[1:])
    for i, block in enumerate(find_blocks(model, (RES, RES))):  # FlopCounterMode: the block, and it merged
        spec = block.spec
        merged, _ = merge_linearized(linearize_block(block, index=i))
        size = (spec.in_h, spec.in_w)
        saved = count_macs(block.module, size, spec.in_channels) - count_macs(merged, size, spec.in_channels)
        assert bw.savings[i] == max(saved, 0)
        assert (saved < 0) == (i == 0)


@pytest.mark.slow
@pytest.mark.parametrize("costly", [2, 5])
def test_costly_block_loses_its_activations_first(tmp_path, costly):
    model_file = tmp_path / "w.pt"
    torch.save(tiny(1).state_dict(), model_file)
    _hand_made_lut(tmp_path / "lut.csv", tiny(), costly)
    result = search(
        ModelRef.of("mobilenet_v2", options=TINY, resolution=RES, weights=model_file), keep=6, data="digits",
        lut=tmp_path / "lut.csv", settings=GateSettings(lam=10.0, score_lr=0.05), method="differentiable",
        config=TrainConfig(epochs=1, batch_size=32, max_batches=3, max_eval_batches=1, lr=0.01),
        out=tmp_path / "plan.json", run=TrainRun(device="cpu"),
    )
    assert result.plan.keep == tuple(int(i != costly) for i in range(7))
    assert result.ranking[-1] == costly
    assert result.scores[costly] == min(result.scores)
    stored = Plan.from_json((tmp_path / "plan.json").read_text())
    assert stored.keep == result.plan.keep and stored.search["ranking"] == result.ranking
    assert stored.search["weights"]["unit"] == "s"


# -- data ----------------------------------------------------------------------------------------


def test_digits_is_real_and_split():
    splits = digits(24)
    assert len(splits.train) + len(splits.val) == 1797 and splits.num_classes == 10
    x, y = splits.val[0]
    assert x.shape == (3, 24, 24) and -1.0 <= float(x.min()) and float(x.max()) <= 1.0 and 0 <= int(y) < 10


# -- fine-tune, merge, resume, DDP ------------------------------------------------------------------


@pytest.mark.slow
def test_finetune_then_merge_gives_the_same_model(tmp_path):
    plan = Plan("mobilenet_v2", (0, 0, 1, 0, 1, 0, 1), TINY)
    weights = tmp_path / "orig.pt"
    torch.save(tiny(2).state_dict(), weights)
    result = finetune(
        plan, model=ModelRef.of("mobilenet_v2", options=TINY, resolution=RES, weights=weights), data="digits",
        distill=True, config=TrainConfig(epochs=1, batch_size=64, max_batches=4),
        run=TrainRun(device="cpu", checkpoint=tmp_path / "ft.pt"), merged_out=tmp_path / "merged.pt",
        merge=MergeChoice.macs(),
    )
    assert result.merged_accuracy == result.accuracy
    assert result.merged_max_abs_diff < 1e-4
    # `dsprof merge --checkpoint` takes the fine-tuning checkpoint and gives the same merged model
    out = tmp_path / "cli_merged.pt"
    cli = dsprof_here("merge", "--model", "mobilenet_v2", *TINY_ARGS, "--resolution", str(RES), "--num-classes", "10",
                      "--plan", plan.to_json(), "--merge-by", "macs", "--checkpoint", tmp_path / "ft.pt", "--out", out)
    assert cli.returncode == 0, cli.stderr
    x = digits(RES).val[0][0][None]
    a, b = load_merged(out), load_merged(tmp_path / "merged.pt")
    result.model.eval()
    torch.testing.assert_close(a(x), b(x), rtol=0, atol=0)
    torch.testing.assert_close(a(x), result.model.cpu()(x), rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_resume_continues_where_a_killed_run_stopped(tmp_path):
    ckpt = tmp_path / "ft.pt"
    args = ["finetune", "--model", "mobilenet_v2", *TINY_ARGS, "--epochs", "6", "--max-batches", "1",
            "--max-eval-batches", "1", "--batch-size", "16", "--device", "cpu", "--out", str(ckpt)]
    # Killed (SIGKILL) right after the checkpoint of epoch 2 was written.
    die_after = [sys.executable, str(Path(__file__).parent / "die_after.py"), "dsprof.search.loop:save_training_checkpoint", "2"]
    killed = subprocess.run(die_after + args, capture_output=True, text=True, env=ENV, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    stopped = torch.load(ckpt, weights_only=True)
    assert stopped["epoch"] == 2
    # the resume in this process (tests/cli_run.py): what is tested is the killed process's checkpoint, read back by
    # `dsprof finetune --resume`; a second process would add only its start-up
    resumed = dsprof_here(*args, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert f"resumed {ckpt} after epoch 2" in resumed.stdout
    assert "train epoch 3/6" in resumed.stdout and "train epoch 2/6" not in resumed.stdout
    final = torch.load(ckpt, weights_only=True)
    assert final["epoch"] == 6 and final["step"] == 6
    assert [h["epoch"] for h in json.loads(final["history"])] == list(range(1, 7))


@pytest.mark.slow
def test_resume_is_the_uninterrupted_run(tmp_path):
    cfg = dict(model=ModelRef.of("mobilenet_v2", options=TINY, resolution=RES), data="digits", check_merge=False,
               config=TrainConfig(epochs=3, batch_size=16, max_batches=2, max_eval_batches=1))
    straight = finetune(run=TrainRun(device="cpu", checkpoint=tmp_path / "a.pt"), **cfg)
    # as if interrupted after epoch 1
    finetune(run=TrainRun(device="cpu", checkpoint=tmp_path / "b.pt", stop_after_epochs=1), **cfg)
    assert torch.load(tmp_path / "b.pt", weights_only=True)["epoch"] == 1
    resumed = finetune(run=TrainRun(device="cpu", checkpoint=tmp_path / "b.pt", resume=True), **cfg)
    assert [h["epoch"] for h in resumed.history] == [1, 2, 3]
    assert resumed.accuracy == straight.accuracy
    for k, v in straight.model.state_dict().items():
        torch.testing.assert_close(resumed.model.state_dict()[k], v, rtol=0, atol=0, msg=k)


def test_resuming_with_another_plan_of_the_model_is_refused_naming_the_plan_it_started_with(tmp_path):
    # a new user resumed a fine-tune with another plan of the same model: a raw load_state_dict traceback (missing
    # and unexpected keys), where the model and options it checks were the same
    cfg = dict(model=ModelRef.of("mobilenet_v2", options=TINY, resolution=RES), data="digits", check_merge=False,
               config=TrainConfig(epochs=2, batch_size=16, max_batches=1, max_eval_batches=1))
    ckpt = tmp_path / "ft.pt"
    finetune(Plan("mobilenet_v2", (1, 0, 1, 1, 1, 0, 0), TINY),
             run=TrainRun(device="cpu", checkpoint=ckpt, stop_after_epochs=1), **cfg)
    with pytest.raises(UsageError) as caught:
        finetune(Plan("mobilenet_v2", (0, 1, 1, 1, 1, 1, 0), TINY), run=TrainRun(device="cpu", checkpoint=ckpt,
                                                                                resume=True), **cfg)
    text = str(caught.value)
    assert text.startswith(f"cannot resume {ckpt}: its weights do not fit this run's model (") and "\n" not in text
    assert text.endswith("(it was started with the plan that keeps 1011100); give the plan it was started with, or "
                         "drop `run=TrainRun(resume=True)` to start over")


@pytest.mark.slow
def test_torchrun_two_cpu_processes(tmp_path):
    plan = tmp_path / "plan.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m", "dsprof.cli",
           "search", "--method", "differentiable", *TINY_ARGS, "--keep", "3", "--epochs", "1", "--max-batches", "2",
           "--batch-size", "16", "--device", "cpu", "--out", str(plan)]
    run = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.count("search epoch 1/1") == 1  # only rank 0 speaks
    written = Plan.from_json(plan.read_text())
    assert sum(written.keep) == 3 and written.search["epochs"] == 1


# -- baselines -----------------------------------------------------------------------------------


def test_random_keep_is_seeded_with_exactly_k():
    plans = {random_keep(17, 7, s) for s in range(10)}
    assert all(sum(p) == 7 for p in plans) and len(plans) > 1
    assert random_keep(17, 7, 3) == random_keep(17, 7, 3)


def test_random_search_from_the_cli(tmp_path):
    from dsprof.cli import main

    assert main(["search", "--method", "random", *TINY_ARGS, "--keep", "3", "--seed", "4", "--out", str(tmp_path / "r.json")]) == 0
    plan = Plan.from_json((tmp_path / "r.json").read_text())
    assert sum(plan.keep) == 3 and plan.search == {"method": "random", "seed": 4, "k": 3}


def test_layer_pruning_drops_only_shape_preserving_blocks():
    model = randomise_bn(get_model("mobilenet_v2", resolution=RES, num_classes=10, width=0.35, depths=[1, 2, 1, 1, 1, 1, 1])).eval()
    blocks = find_blocks(model, (RES, RES))
    keep = (1, 0, 0, 1, 1, 1, 1, 0)  # block 2 is a residual block (24 -> 24, stride 1); 1 and 7 change shape
    pruned, decisions = layer_prune(model, keep)
    assert [(d.index, d.dropped) for d in decisions] == [(1, False), (2, True), (7, False)]
    assert isinstance(pruned.get_submodule(blocks[2].name), torch.nn.Identity)
    assert "kept" in decisions[0].reason
    assert pruned(torch.randn(2, 3, RES, RES)).shape == (2, 10)


# -- DepthShrinker+ ------------------------------------------------------------------------------


def _small_vgg():
    from torchvision.models.vgg import VGG, make_layers

    torch.manual_seed(0)
    model = VGG(make_layers([8, "M", 16, "M", 16, 24, "M", 24, 24, "M"], batch_norm=True), num_classes=10, init_weights=False)
    model.classifier = torch.nn.Linear(24 * 7 * 7, 10)  # torchvision's is sized for 512 channels
    return randomise_bn(model, 3)


def _expanded_then_shrunk(model, x):
    from dsprof.search.expand import ExpandedConv, expand_model, set_linear, shrink_model

    expanded = randomise_bn(expand_model(model), 5).eval()
    n = sum(isinstance(m, ExpandedConv) for m in expanded.modules())
    set_linear(expanded)
    shrunk = shrink_model(expanded).eval()
    assert [(k, v.shape) for k, v in shrunk.state_dict().items()] == [(k, v.shape) for k, v in model.state_dict().items()]
    assert [type(m) for m in shrunk.modules()] == [type(m) for m in model.modules()]
    torch.testing.assert_close(shrunk(x), expanded(x), rtol=1e-9, atol=1e-9)
    return n, expanded


def test_ds_plus_vgg_expands_the_middle_convs_and_shrinks_back_exactly():
    model = _small_vgg().double().eval()
    x = torch.randn(2, 3, 33, 33, dtype=torch.float64)  # odd size: the borders must be exact too
    n, expanded = _expanded_then_shrunk(model, x)
    assert n == 6 - 3  # 6 convolutions: not the first two, not the last
    same, wider = expanded.features[8], expanded.features[11]  # the 3rd (16 -> 16) and 4th (16 -> 24) convs
    assert same.pw.out_channels == 6 * 16 and same.dw.kernel_size == (3, 3) and same.residual
    assert wider.pwl.out_channels == 24 and not wider.residual


@pytest.mark.slow
def test_ds_plus_mobilenet_v2_expands_every_second_block_and_shrinks_back_exactly():
    from dsprof.search.expand import ExpandedConv

    model = randomise_bn(get_model("mobilenet_v2", resolution=RES, num_classes=10, width=0.5, depths=[1, 2, 2, 1, 1, 1, 1]))
    model = model.double().eval()
    x = torch.randn(2, 3, RES + 1, RES + 1, dtype=torch.float64)
    n, expanded = _expanded_then_shrunk(model, x)
    assert n == 4  # blocks 1, 3, 5, 7 of 9 (block 0 has no expansion convolution)
    block = expanded.features[2].conv[0][0]
    assert isinstance(block, ExpandedConv) and block.dw.kernel_size == (1, 1) and block.pw.out_channels == 6 * block.pw.in_channels


@pytest.mark.slow
def test_ds_plus_training_from_the_cli_shrinks_to_the_original_architecture(tmp_path, capsys):
    from dsprof.cli import main

    out = tmp_path / "shrunk.pt"
    assert main(["finetune", "--model", "mobilenet_v2", "--width", "0.35", "--depths", "1,2,1,1,1,1,1", "--ds-plus",
                 "--epochs", "2", "--linear-epochs", "1", "--max-batches", "2", "--max-eval-batches", "2",
                 "--device", "cpu", "--out", str(tmp_path / "ck.pt"), "--merged-out", str(out)]) == 0
    printed = capsys.readouterr().out
    line = next(x for x in printed.splitlines() if x.startswith("shrunk model"))
    assert float(line.rsplit(" ", 1)[1]) < 1e-4, line  # shrunk vs trained (expanded, linear) logits
    state = torch.load(tmp_path / "ck.pt", weights_only=True)
    assert state["kind"] == "train-ds-plus" and state["epoch"] == 2
    model = get_model("mobilenet_v2", num_classes=10, width=0.35, depths=[1, 2, 1, 1, 1, 1, 1])
    from dsprof.models import load_checkpoint

    load_checkpoint(model, out)  # the original architecture takes the shrunk weights as they are


@pytest.mark.slow
def test_search_resume_is_the_uninterrupted_search(tmp_path):
    model = ModelRef.of("mobilenet_v2", options=TINY, resolution=RES)
    cfg = dict(keep=3, data="digits", settings=GateSettings(lam=0.5, score_lr=0.05), method="differentiable",
               config=TrainConfig(epochs=2, batch_size=16, max_batches=2, max_eval_batches=1))
    straight = search(model, out=tmp_path / "a.json", run=TrainRun(device="cpu"), **cfg)
    search(model, out=tmp_path / "b.json", run=TrainRun(device="cpu", stop_after_epochs=1), **cfg)
    assert torch.load(tmp_path / "b.json.ckpt.pt", weights_only=True)["epoch"] == 1
    resumed = search(model, out=tmp_path / "b.json", run=TrainRun(device="cpu", resume=True), **cfg)
    assert resumed.scores == straight.scores and resumed.plan.keep == straight.plan.keep
    assert [h["epoch"] for h in resumed.history] == [1, 2]



def test_search_and_finetune_train_digits_at_32_px_without_a_resolution(tmp_path):
    cfg = TrainConfig(epochs=1, batch_size=16, max_batches=1, max_eval_batches=1)
    found = search(ModelRef.of("mobilenet_v2", options=TINY), keep=3, data="digits", config=cfg,
                   out=tmp_path / "p.json", run=TrainRun(device="cpu"), method="differentiable")
    # the decay weights are the blocks' MAC savings at the training resolution; MobileNetV2's stem halves
    # it, so the first block sees 16x16 at 32 px (112x112 at the model's own 224)
    first = found.plan.search["weights"]["blocks"][0]["spec"]
    assert first.endswith(",in=16x16)"), first
    finetune(model=ModelRef.of("mobilenet_v2", options=TINY), data="digits", config=cfg,
             run=TrainRun(device="cpu", checkpoint=tmp_path / "ft.pt"), check_merge=False)
    assert torch.load(tmp_path / "ft.pt", weights_only=True)["resolution"] == 32
    # and `merge` of that checkpoint, given no resolution, merges the model at the 32 px it was fine-tuned at (a new
    # user's merged file said 224 px, with its MACs table for 224)
    import dsprof
    from dsprof.models import spec_macs
    merged = dsprof.merge(plan=found.plan, checkpoint=tmp_path / "ft.pt", out=tmp_path / "merged.pt",
                          merge=MergeChoice.macs())
    assert torch.load(tmp_path / "merged.pt", weights_only=True)["resolution"] == [32, 32]
    at_32 = [spec_macs(b.spec) for b in find_blocks(get_model("mobilenet_v2", resolution=32, **TINY))]
    assert list(merged.costs["macs_before"].dropna())[:len(at_32)] == pytest.approx(at_32, rel=1e-9)

def test_image_folder_tree_in_imagenet_layout(tmp_path):
    from PIL import Image

    from dsprof.search import image_folder, load_data

    g = torch.Generator().manual_seed(0)
    for split in ("train", "val"):
        for cls in ("cat", "dog"):
            (tmp_path / split / cls).mkdir(parents=True)
            for i in range(2):
                pixels = (torch.rand(20, 30, 3, generator=g) * 255).to(torch.uint8).numpy()
                Image.fromarray(pixels).save(tmp_path / split / cls / f"{i}.png")
    splits = load_data(tmp_path, 16)
    assert splits.num_classes == 2 and len(splits.train) == 4 and len(splits.val) == 4
    x, y = splits.train[0]
    assert x.shape == (3, 16, 16) and splits.val[3][1] == 1
    with pytest.raises(FileNotFoundError, match="ImageNet layout"):
        image_folder(tmp_path / "train")
    # what a new user's folders did (tracebacks, or training on one class): each one line, before any epoch
    from dsprof.errors import DsprofError
    with pytest.raises(DsprofError, match="does not exist: give the root of an image folder .* or `data='shapes'`"):
        image_folder(tmp_path / "nowhere")
    (tmp_path / "train" / "bird").mkdir()
    (tmp_path / "val" / "bird").mkdir()
    with pytest.raises(DsprofError, match=r"Couldn't find any class folder|Found no valid file for the classes bird"):
        image_folder(tmp_path)
    for split in ("train", "val"):
        for cls in ("bird", "dog"):
            for f in (tmp_path / split / cls).iterdir():
                f.unlink()
            (tmp_path / split / cls).rmdir()
    with pytest.raises(UsageError, match="train/ has 1 class folder \\(cat\\); a model learns nothing to tell apart"):
        image_folder(tmp_path)
    (tmp_path / "train" / "dog").mkdir()
    (tmp_path / "val" / "dog").mkdir()
    for split in ("train", "val"):
        (tmp_path / split / "dog" / "0.png").write_bytes(b"not a png")
    broken = image_folder(tmp_path, 16)
    with pytest.raises(DsprofError, match="0.png is not an image that can be read .*; remove it from the image folder"):
        broken.train[len(broken.train) - 1]


def test_an_interrupted_search_says_its_plan_file_is_not_its_answer_yet(tmp_path):
    # the differentiable search rewrites --out every epoch: interrupted, the file held epoch 1's plan and nothing
    # said so (a new user fine-tuned by it)
    from dsprof.cli.search import interrupted_note

    out, ckpt = tmp_path / "plan.json", tmp_path / "plan.json.ckpt.pt"
    assert interrupted_note("importance", out, ckpt) == f"interrupted: {out} not written (the plan is written at the end)"
    assert interrupted_note("differentiable", out, ckpt) == (
        f"interrupted before the first epoch ended; nothing saved ({ckpt} not written)")
    out.write_text("{}")
    ckpt.write_bytes(b"")
    assert interrupted_note("differentiable", out, ckpt) == (
        f"interrupted: {ckpt} holds the epochs finished; the same command with --resume continues; {out} is not the "
        "search's answer (it holds the plan of the last epoch finished, or an earlier run's)")
    ckpt.write_text('{"format": "dsprof.importance-progress"}\n')  # the importance search's fine-tunes, kept
    assert interrupted_note("importance", out, ckpt, "finetune") == (
        f"interrupted: {out} not written (the plan is written at the end); {ckpt} holds the fine-tunes finished, and "
        "the same command with --resume continues from them")


def test_the_finetune_proxys_fine_tunes_are_kept_as_they_end_and_a_resumed_run_does_not_repeat_them(tmp_path):
    # a new user's Ctrl-C of `search --proxy finetune` lost every fine-tune done (n + 1 per seed: hours on ImageNet)
    # and --resume was refused. Each now ends as one line of the checkpoint; a run given resume takes them.
    import json as _json

    from dsprof.search.measured import measure_importance

    weights = tmp_path / "w.pt"
    torch.save(tiny(10).state_dict(), weights)
    cfg = TrainConfig(epochs=1, batch_size=16, max_batches=1, max_eval_batches=2)
    common = dict(options=TINY, weights=weights, data="digits", resolution=RES, config=cfg, log=lambda _: None)
    progress = tmp_path / "plan.json.ckpt.pt"
    straight = measure_importance("mobilenet_v2", progress=progress, **common)
    lines = progress.read_text().splitlines()
    assert len(lines) == 1 + 7  # the original and each of the 7 blocks, seed 0
    assert [_json.loads(x)["block"] for x in lines] == [None, *range(7)]
    # killed after three fine-tunes, the fourth line cut mid-write: resumed, it fine-tunes the other five only
    progress.write_text("\n".join(lines[:3]) + "\n" + lines[3][:20])
    resumed = measure_importance("mobilenet_v2", progress=progress, resume=True, **common)
    again = progress.read_text().splitlines()
    assert again[:3] == lines[:3] and len(again) == 3 + 5  # the cut line left out, then five new ones
    assert [_json.loads(x)["block"] for x in again] == [None, *range(7)]
    assert resumed.base_accuracy == straight.base_accuracy  # read back, not trained again
    assert resumed.linearised_accuracy[:2] == straight.linearised_accuracy[:2]
    # the file is data: another run's fine-tunes, or a line that is none, are refused in one line
    other = dict(common, config=TrainConfig(epochs=1, batch_size=16, max_batches=1, max_eval_batches=1))
    with pytest.raises(UsageError, match="cannot resume .*: it holds the fine-tunes of another run"):
        measure_importance("mobilenet_v2", progress=progress, resume=True, **other)
    progress.write_text('{"format": "dsprof.importance-progress", "seed": 0, "block": 99, "accuracy": 0.5}\n{}\n')
    with pytest.raises(UsageError, match="line 1 is not a fine-tune of an importance search"):
        measure_importance("mobilenet_v2", progress=progress, resume=True, **common)
    # without resume a run starts the file over
    measure_importance("mobilenet_v2", progress=progress, **other)
    assert len(progress.read_text().splitlines()) == 8


def test_resume_is_refused_where_the_search_keeps_nothing_to_resume_from():
    cfg = dict(keep=3, data="digits", run=TrainRun(device="cpu", resume=True))
    with pytest.raises(UsageError, match=r"`method='importance'` with `proxy='zero-shot'` keeps none"):
        search(ModelRef.of("mobilenet_v2", options=TINY, resolution=RES), method="importance", proxy="zero-shot", **cfg)
    with pytest.raises(UsageError, match=r"needs the checkpoint path"):
        search(ModelRef.of("mobilenet_v2", options=TINY, resolution=RES), method="importance", proxy="finetune", **cfg)
