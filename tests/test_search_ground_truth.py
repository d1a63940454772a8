"""Issue #13: ground-truth statistics, the ranking logic, bounded scores, and a tiny enumeration the search solves."""

import math
import warnings

import pytest
import torch
from scipy import stats

from dsprof.lut import build_lut, predict_latency
from dsprof.records.plan import Plan
from dsprof.profiler import TimingConfig, Workloads, measure
from dsprof.models import ModelRef
from dsprof.search import GateSettings, TrainConfig, TrainRun, search
from dsprof.search.gates import ActivationGates
from dsprof.search.ground_truth import (
    accuracy_percentile,
    all_keeps,
    enumerate_plans,
    gap_to_front,
    kendall_tau,
)
from dsprof.planning.dp import nondominated
from dsprof.search.importance import importance_keep
from dsprof.search.gates import annealed_k, runaway_spread
from dsprof.search.differentiable import GateScoresRanAway, runaway_message
from rule_lut import rule_lut

# -- statistics against independent references -----------------------------------------------------


def test_all_keeps_is_every_combination():
    keeps = all_keeps(5, 2)
    assert len(keeps) == math.comb(5, 2) == 10
    assert len(set(keeps)) == 10 and all(sum(k) == 2 for k in keeps)
    assert all_keeps(3, 0) == [(0, 0, 0)] and all_keeps(3, 3) == [(1, 1, 1)]
    with pytest.raises(ValueError, match="0..3"):
        all_keeps(3, 4)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_kendall_tau_is_scipys_tau_b(seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 5, (12,), generator=g).tolist()  # ties on purpose
    y = torch.randint(0, 5, (12,), generator=g).tolist()
    assert kendall_tau(x, y) == pytest.approx(stats.kendalltau(x, y).statistic, abs=1e-12)
    assert kendall_tau([1, 2, 3, 4], [10, 20, 30, 40]) == 1.0
    assert kendall_tau([1, 2, 3, 4], [4, 3, 2, 1]) == -1.0
    # hand count: pairs (1,2) (1,3) (2,3) -> concordant, concordant, discordant: (2 - 1) / 3
    assert kendall_tau([1, 2, 3], [1, 3, 2]) == pytest.approx(1 / 3, abs=1e-12)
    assert math.isnan(kendall_tau([1, 1, 1], [1, 2, 3]))


def test_percentile_mid_rank():
    population = [0.1, 0.2, 0.3, 0.4]
    assert accuracy_percentile(0.5, population) == 1.0
    assert accuracy_percentile(0.0, population) == 0.0
    assert accuracy_percentile(0.3, population) == pytest.approx((2 + 0.5) / 4, abs=1e-12)
    assert accuracy_percentile(0.25, population) == 0.5


def test_pareto_front_and_gap():
    costs = [1, 2, 2, 3, 4, 5]
    accs = [0.5, 0.6, 0.7, 0.65, 0.9, 0.9]
    # by hand: (1, .5) front; (2, .7) front, (2, .6) dominated; (3, .65) dominated by (2, .7); (4, .9) front;
    # (5, .9) dominated by (4, .9)
    assert nondominated(costs, accs) == [0, 2, 4]
    with pytest.warns(DeprecationWarning, match="nondominated"):  # the old name, for one release
        from dsprof.search.ground_truth import pareto_front
    assert pareto_front(costs, accs) == [0, 2, 4]
    assert gap_to_front(3, 0.65, costs, accs) == pytest.approx(0.05, abs=1e-12)
    assert gap_to_front(2, 0.7, costs, accs) == 0.0
    assert gap_to_front(0.5, 0.1, costs, accs) == 0.0  # cheaper than every plan: nothing to compare with


# -- the ranking logic ------------------------------------------------------------------------------


def test_importance_keep_top_k_with_decay_and_ties():
    drops = [0.10, 0.02, 0.30, 0.02, 0.05]
    assert importance_keep(drops, 2) == (1, 0, 1, 0, 0)
    assert importance_keep(drops, 3) == (1, 0, 1, 0, 1)
    assert importance_keep(drops, 4) == (1, 1, 1, 0, 1)  # tie 0.02 / 0.02: the earlier block
    # with lam, block 2's saving weight 5 costs it 0.5: merit 0.3 - 0.5 < every other block
    assert importance_keep(drops, 2, [1, 0, 5, 0, 0], lam=0.1) == (0, 1, 0, 0, 1)
    with pytest.raises(ValueError, match="0..5"):
        importance_keep(drops, 6)


def test_gates_rank_ties_by_index_and_keep_exactly_k():
    gates = ActivationGates([f"b{i}" for i in range(6)], 3, init=1.0)
    assert gates.keep() == (1, 1, 1, 0, 0, 0)  # all equal: the earlier blocks, never more than k
    gates.scores.data = torch.tensor([0.2, 0.9, 0.2, -1.0, 0.9, 0.5])
    assert gates.ranking() == [1, 4, 5, 0, 2, 3]
    assert gates.keep() == (0, 1, 0, 0, 1, 1)
    assert gates.spread() == pytest.approx(1.9, abs=1e-6)


def test_normalised_straight_through_gradient_and_bound():
    gates = ActivationGates(["a", "b", "c"], 2, init=1.0, normalize=True, bound=0.5)
    mask = gates.refresh()
    (mask * torch.tensor([4.0, -8.0, 2.0])).sum().backward()
    assert gates.scores.grad.tolist() == [0.5, -1.0, 0.25]  # divided by the largest |entry|, 8
    gates.scores.data = torch.tensor([3.0, 2.9, -7.0])  # mean -1/3: re-centred on 1 -> 4.33, 4.23, -5.67
    gates.clamp_()
    assert gates.scores.tolist() == pytest.approx([1.5, 1.5, 0.5], abs=1e-6)  # then clamped to [init - bound, init + bound]
    gates.scores.data = torch.tensor([2.2, 1.7, 2.0])  # mean 1.9667: shifted by -0.9667, inside the bounds
    gates.clamp_()
    assert gates.scores.tolist() == pytest.approx([1.2333, 0.7333, 1.0333], abs=1e-4)
    gates.scores.data[0] = float("nan")
    with pytest.raises(FloatingPointError, match="score learning rate"):
        gates.clamp_()


def test_annealed_k_falls_from_all_to_k():
    assert [annealed_k(s, 4, 8, 4) for s in range(6)] == [8, 7, 6, 5, 4, 4]
    assert annealed_k(0, 0, 8, 4) == 4
    assert runaway_spread(1.0) == 10.0 and runaway_spread(-3.0) == 30.0


# -- seeded search runs -------------------------------------------------------------------------------

TINY = {"width": 0.35, "depths": [1] * 7}
RES = 16


def _train(path, **cfg):
    from dsprof.search import finetune

    torch.set_num_threads(1)
    return finetune(model=ModelRef.of("mobilenet_v2", options=TINY, resolution=RES), data="digits",
                    run=TrainRun(device="cpu", checkpoint=path), config=TrainConfig(**cfg), check_merge=False)


@pytest.fixture(scope="module")
def unstable_original(tmp_path_factory):
    """Trained the way search_digits trained its original before issue #13 (lr 0.1, no warm-up), shorter."""
    path = tmp_path_factory.mktemp("gt") / "unstable.pt"
    _train(path, epochs=4, lr=0.1)
    return path


def _search(weights, capsys, **gates):
    found = search(ModelRef.of("mobilenet_v2", options=TINY, resolution=RES, weights=weights), keep=3, data="digits",
                   run=TrainRun(device="cpu"), method="differentiable", settings=GateSettings(lam=0.0, **gates),
                   config=TrainConfig(epochs=2, lr=0.01, seed=0))
    return found, capsys.readouterr().out


def test_score_spread_stays_bounded_where_it_ran_away(unstable_original, capsys):
    # before issue #13 (sum gradient, unbounded scores) with a large score learning rate: the scores run away
    with pytest.warns(GateScoresRanAway, match="the gate scores ran away"):
        before, log = _search(unstable_original, capsys, score_lr=2.0)
    spread = max(before.scores) - min(before.scores)
    assert spread > runaway_spread(1.0), before.scores
    assert "ranking" in log and "score spread" in log
    # the same run with normalised, bounded scores: within [init - 1, init + 1] = [0, 2], no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error", GateScoresRanAway)
        after, log = _search(unstable_original, capsys, score_lr=2.0, score_normalize=True, score_bound=1.0)
    assert all(0.0 <= s <= 2.0 for s in after.scores), after.scores
    assert "ran away" not in log
    assert len(after.history) == 2 and all("score_spread" in h and "ranking" in h for h in after.history)


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    """A tiny MobileNetV2 (7 blocks) trained on the digits at 16x16 with the issue-#13 recipe (warm-up)."""
    path = tmp_path_factory.mktemp("gt") / "original.pt"
    r = _train(path, epochs=6, lr=0.05, warmup_epochs=1)
    assert r.accuracy > 0.8  # a trained model, or nothing below means anything
    return path


def test_tiny_enumeration_the_importance_search_solves(original, tmp_path):
    # ground truth: the 7 plans that linearise one block, each fine-tuned 1 epoch with seeds 0 and 1, each priced by
    # a LUT (its medians by tests/rule_lut.py's rule) as `predict_latency` prices it
    timing = TimingConfig(warmup_s=0.0, warmup_min_iters=1, warmup_max_s=0.01, first_warmup_s=0.0, min_samples=3,
                          max_samples=4, budget_s=0.02, min_sample_s=0.0)
    records = measure(ModelRef.of("mobilenet_v2", options=TINY, resolution=RES),
                      workloads=Workloads(variants=("original", "merged", "linear"), model_variants=("original",)),
                      timing=timing, out=tmp_path / "m.jsonl", progress=False).path
    lut = rule_lut(build_lut([records]).save(tmp_path / "lut.csv"), records)
    cfg = TrainConfig(epochs=1, lr=0.02)
    outcomes = enumerate_plans("mobilenet_v2", k=6, options=TINY, weights=original, resolution=RES, config=cfg,
                               seeds=(0, 1), log=lambda _: None, lut=lut)
    assert len(outcomes) == 7 and sorted(o.keep.index(0) for o in outcomes) == list(range(7))
    for o in outcomes:
        expected = predict_latency(ModelRef.of("mobilenet_v2", options=TINY, resolution=RES),
                                   lut, Plan("mobilenet_v2", o.keep, TINY)).total_s
        assert o.latency_s == pytest.approx(expected, rel=1e-12)
    accs = [o.accuracy for o in outcomes]
    best = max(accs)
    assert best - min(accs) > 0.01  # the plans differ by more than a few images: there is something to find
    # the full measurement (fine-tunes, its own seed 100, not the ground truth's runs); the cheaper default proxy
    # does not solve this one (zero-shot picks the 3rd of 7 plans: the two blocks at 1x1 pixel tie near zero)
    found = search(ModelRef.of("mobilenet_v2", options=TINY, resolution=RES, weights=original), keep=6, data="digits",
                   run=TrainRun(device="cpu"), method="importance", proxy="finetune", settings=GateSettings(lam=0.0),
                   config=TrainConfig(epochs=1, lr=0.02, seed=100))
    chosen = next(o for o in outcomes if o.keep == tuple(found.plan.keep))
    seed_spread = sum(max(o.accuracies) - min(o.accuracies) for o in outcomes) / len(outcomes)
    table = [(o.keep_str, round(o.accuracy, 4), o.accuracies) for o in outcomes]
    # the best plan, or one the seeds cannot tell from it; and one of the top two of seven in any case
    assert best - chosen.accuracy <= seed_spread, (found.plan.keep, table)
    assert accuracy_percentile(chosen.accuracy, accs) >= 0.75, (found.plan.keep, table)


def test_generated_shapes_are_seeded_balanced_and_drawn_as_documented():
    from dsprof.search.data import load_data, shapes

    a, b = shapes(32, n_train=200, n_val=100, seed=3), shapes(32, n_train=200, n_val=100, seed=3)
    xa, ya = a.train.base.tensors
    assert torch.equal(xa, b.train.base.tensors[0]) and torch.equal(ya, b.train.base.tensors[1])
    assert not torch.equal(xa, shapes(32, n_train=200, n_val=100, seed=4).train.base.tensors[0])
    labels = torch.cat([ya, a.val.tensors[1]])
    assert torch.bincount(labels, minlength=10).tolist() == [30] * 10  # 300 images, classes in turn
    assert xa.shape == (200, 3, 32, 32) and float(xa.min()) >= -1 and float(xa.max()) <= 1
    # striped classes (5-9) cover about half the area of their solid twins (0-4): equal stripes and gaps
    big = shapes(32, n_train=2000, n_val=0, seed=0)
    x, y = big.train.base.tensors
    fg = ((x + 1) / 2).mean(1).gt(0.4).float().mean((1, 2))  # foreground: colour >= 0.5, background ~0 +- 0.1
    solid = torch.stack([fg[y == c].mean() for c in range(5)])
    striped = torch.stack([fg[y == c + 5].mean() for c in range(5)])
    assert torch.allclose(striped / solid, torch.full((5,), 0.5), atol=0.12), (striped / solid).tolist()
    # a ring keeps 1 - 0.55^2 = 0.70 of its disk, a frame 0.70 of its square (same size distribution)
    assert float(solid[1] / solid[0]) == pytest.approx(0.6975, abs=0.07)
    assert float(solid[3] / solid[2]) == pytest.approx(0.6975, abs=0.07)
    assert load_data("shapes", 16).num_classes == 10


def test_normalised_gradient_survives_a_gradient_scaler():
    # under AMP the loss is multiplied by the scaler's scale S before backward and the gradients divided by S
    # after: the normalised straight-through gradient must come out with largest entry 1, not 1 / S
    gates = ActivationGates(["a", "b"], 1, init=1.0, normalize=True)
    gates.grad_scale = 1024.0
    (gates.refresh() * torch.tensor([-3.0, 1.5]) * 1024.0).sum().backward()
    assert (gates.scores.grad / 1024.0).tolist() == [-1.0, 0.5]


def test_the_runaway_advice_names_parameters_to_python_and_options_to_the_command_line():
    from dsprof.cli.flags import command_line_text

    said = runaway_message(9.5, 4.0, [5.0, -4.5])
    assert ("`settings=GateSettings(score_normalize=True)` and `settings=GateSettings(score_bound=)`, or lower "
            "`settings=GateSettings(score_lr=)`") in said
    shown = command_line_text(said, "search")
    assert "--score-normalize and --score-bound, or lower --score-lr" in shown and "score_normalize" not in shown

