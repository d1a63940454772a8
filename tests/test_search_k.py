"""Every search method's k counts only the blocks with a removable activation, as the planner's does (issue #47).

timm's EfficientNet-B0 (the zoo's ``efficientnet_b0``) ends in a block without one (its last projection and the
head's 1x1 convolution, whose activation stays: tests/test_block_view_k.py reads it from the architecture). So
``keep=k`` keeps exactly k of blocks 0..15, a fraction resolves against 16 (``keep=0.5``: 8, where 17 would give
floor(8.5 + 0.5) = 9), and block 16 is never one of the k: a search leaves it linearised (0: it loses nothing
there, and the merge rule merges it or not by price). MobileNetV2 (every block has an activation) draws and
chooses as before: its expected plans are worked here from the scores or the seeded permutation, independently of
the search's code (and were checked against the code before the change, af4a581).

Real models with random weights at 32 px, the built-in digits, one training step at most.
"""

from __future__ import annotations

import warnings

import pytest
import torch

from dsprof.errors import UsageError
from dsprof.models import ModelRef
from dsprof.search import GateSettings, ProxySettings, TrainConfig, TrainRun, gate_model, random_keep, search
from dsprof.search.gates import GatedActivation, annealed_k
from dsprof.search.importance import importance_keep

pytestmark = pytest.mark.usefixtures("one_thread")

EFF = ModelRef.of("efficientnet_b0", resolution=32)
TINY = ModelRef.of("mobilenet_v2", options={"width": 0.35, "depths": [1] * 7}, resolution=32)
LAST = 16  # EfficientNet-B0's block without a removable activation
COUNTED = (True,) * 16 + (False,)
STEP = TrainConfig(epochs=1, batch_size=8, max_batches=1, max_eval_batches=1)


def _top(scores, k: int, among: range) -> set[int]:
    """The k highest of ``scores`` over the blocks ``among`` (ties: the earlier block), by a plain sort."""
    return set(sorted(among, key=lambda i: (-float(scores[i]), i))[:k])


@pytest.fixture(scope="module")
def eff_gated():
    return gate_model(EFF.build().eval(), 0.5, input_size=(32, 32))


def test_gates_keep_k_of_the_blocks_with_activations(eff_gated):
    """``keep=0.5`` is 8 of the 16 counted blocks; whatever the scores (block 16's the highest of all in half the
    draws), the mask keeps the 8 highest of blocks 0..15, and block 16 is 0; the forward pass uses that mask."""
    gates = eff_gated.gates
    assert gates.counted == COUNTED and gates.n_counted == 16 and gates.k == 8
    for seed in range(6):
        scores = torch.randn(17, generator=torch.Generator().manual_seed(seed))
        if seed % 2:
            scores[LAST] = 10.0  # the highest score: still never kept
        gates.scores.data = scores
        keep = gates.keep()
        assert keep[LAST] == 0 and sum(keep) == 8
        assert {i for i, v in enumerate(keep) if v} == _top(scores, 8, range(16))
    seen = {}
    for m in eff_gated.modules():
        if isinstance(m, GatedActivation):
            m.register_forward_hook(lambda mod, a, o: seen.__setitem__(mod.index, float(mod.gates.current[mod.index])))
    with torch.no_grad():
        eff_gated(torch.randn(1, 3, 32, 32))
    assert sorted(seen) == list(range(16))  # block 16 has no gated activation
    assert [seen[i] for i in range(16)] == [float(v) for v in keep[:16]]
    # every counted block kept: the top of the annealing (from 16, not 17, down to k)
    gates.k = annealed_k(0, 10, gates.n_counted, 8)
    assert gates.keep() == (1,) * 16 + (0,)
    gates.k = 8


def test_gates_on_a_model_with_every_block_counted_are_as_before():
    """MobileNetV2: every block counted; the mask is the top k of all scores (ties: the earlier block)."""
    gates = gate_model(TINY.build(), 3).gates
    assert gates.counted == (True,) * 7 and gates.k == 3
    for seed in range(4):
        scores = torch.randn(7, generator=torch.Generator().manual_seed(seed)).round(decimals=0)  # some ties
        gates.scores.data = scores
        assert {i for i, v in enumerate(gates.keep()) if v} == _top(scores, 3, range(7))


def test_differentiable_search_keeps_k_of_16():
    """One training step on EfficientNet-B0: the plan keeps 8 of blocks 0..15 for ``keep=0.5`` (the 8 highest
    scores among them), block 16 linearised; ``keep=17`` is refused in the counted blocks' terms."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = search(EFF, keep=0.5, data="digits", config=STEP, method="differentiable",
                       settings=GateSettings(lam=1.0, score_lr=0.1), run=TrainRun(device="cpu"))
    keep = found.plan.keep
    assert len(keep) == 17 and keep[LAST] == 0 and sum(keep) == 8
    assert {i for i, v in enumerate(keep) if v} == _top(found.scores, 8, range(16))
    assert found.plan.search["k"] == 8 and found.k == 8 and found.counted == COUNTED
    with pytest.raises(UsageError, match=r"`keep=16` of 16 blocks with a removable activation: every block keeps"):
        search(EFF, keep=16, data="digits", config=STEP, method="differentiable", run=TrainRun(device="cpu"))


def test_random_keep_draws_among_the_counted_blocks():
    """The draw is torch's seeded permutation of the counted blocks' places, its first k kept: on EfficientNet-B0
    a permutation of 16 (block 16 never drawn); with every block counted, the permutation of all, as before."""
    for seed in range(5):
        keep = random_keep(17, 0.5, seed, COUNTED)
        order = torch.randperm(16, generator=torch.Generator().manual_seed(seed)).tolist()
        assert {i for i, v in enumerate(keep) if v} == set(order[:8]) and keep[LAST] == 0
        order = torch.randperm(17, generator=torch.Generator().manual_seed(seed)).tolist()
        assert {i for i, v in enumerate(random_keep(17, 7, seed)) if v} == set(order[:7])
        assert random_keep(17, 7, seed) == random_keep(17, 7, seed, (True,) * 17)


def test_random_search_from_the_cli_counts_16(tmp_path, capsys):
    """`dsprof search --method random` on EfficientNet-B0: 8 of 16 for 0.5, and the line says so and names block 16;
    on MobileNetV2 the line is as before (no block left uncounted)."""
    from dsprof.cli import main
    from dsprof.records.plan import Plan

    assert main(["search", "--method", "random", "--model", "efficientnet_b0", "--keep", "0.5", "--seed", "4",
                 "--out", str(tmp_path / "r.json")]) == 0
    plan = Plan.from_json((tmp_path / "r.json").read_text())
    order = torch.randperm(16, generator=torch.Generator().manual_seed(4)).tolist()
    assert {i for i, v in enumerate(plan.keep) if v} == set(order[:8]) and plan.search["k"] == 8
    keep = "".join(map(str, plan.keep))
    assert (f"keep {keep} (8 of 16 blocks keep their activations; block 16 has no removable activation: not counted)"
            in capsys.readouterr().out)
    assert main(["search", "--method", "random", "--model", "mobilenet_v2", "--width", "0.35", "--depths",
                 "1,1,1,1,1,1,1", "--keep", "3", "--seed", "4", "--out", str(tmp_path / "m.json")]) == 0
    keep = "".join(map(str, Plan.from_json((tmp_path / "m.json").read_text()).keep))
    assert f"keep {keep} (3 of 7 blocks keep their activations)\n" in capsys.readouterr().out


def test_importance_keep_chooses_among_the_counted_blocks():
    """Hand-worked: the block not counted (index 2, the most important) is never chosen; the others by merit."""
    drops = [0.3, 0.1, 0.9, 0.2, 0.5]
    counted = (True, True, False, True, True)
    assert importance_keep(drops, 2, counted=counted) == (1, 0, 0, 0, 1)
    assert importance_keep(drops, 4, counted=counted) == (1, 1, 0, 1, 1)
    assert importance_keep(drops, 2) == (0, 0, 1, 0, 1)  # every block counted: as before
    with pytest.raises(UsageError, match=r"0\.\.4"):
        importance_keep(drops, 5, counted=counted)


def test_importance_search_without_a_lut_keeps_k_of_16():
    """The zero-shot importance of EfficientNet-B0 without a LUT: the 8 most important of blocks 0..15 keep their
    activations for ``keep=0.5``; block 16 (its importance 0: linearised, nothing changes) is linearised."""
    found = search(EFF, keep=0.5, data="digits", config=STEP, method="importance",
                   settings=ProxySettings(batches=1, eval_batches=1, batch_size=8), run=TrainRun(device="cpu"))
    keep = found.plan.keep
    assert found.scores[LAST] == pytest.approx(0.0, abs=1e-6)
    assert keep[LAST] == 0 and sum(keep) == 8 and found.k == 8 and found.plan.search["k"] == 8
    assert {i for i, v in enumerate(keep) if v} == _top(found.scores, 8, range(16))


def test_the_block_left_linearised_loses_nothing():
    """Why a search may leave block 16 linearised: without its (absent) activations it computes what it computed
    (float64, the whole model with only block 16 linearised equals the original to 1e-12), and the merge rule on
    MACs leaves it unmerged (its merged 1x1 1152 -> 1280 has more MACs than its two 1x1s: 1 474 560 against 778 240 at
    1x1 pixels), which merges exactly."""
    from dsprof.merging import linearize_model, merge_model
    from dsprof.planning.decide import merge_rule
    from dsprof.records.plan import Plan

    model = EFF.build().eval().double()
    decided = merge_rule(model, merge_by="macs").decide(Plan("efficientnet_b0", (1,) * 16 + (0,))).plan
    assert decided.merge == (False,) * 17
    linear = linearize_model(model, decided).eval()
    merged = merge_model(linear, decided).eval()
    x = torch.randn(2, 3, 32, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want = model(x)
        assert float((linear(x) - want).abs().max()) <= 1e-12
        assert float((merged(x) - want).abs().max()) <= 1e-12
