"""`finetune` takes a model in every form `search` takes (issue #44, item 1: one model reference, resolved once).

The model is tests/models/tinyconv.py (three inverted-residual blocks, its docstring), as an object, as its model file
``PATH.py:build``, as a `ModelRef` of that file, or named by its plan alone; and timm's own tiny test network by its
library name. Whatever the form, the same starting weights, seed and data must give the same fine-tuned model, bit for
bit (one thread): the form only says which model, never how it trains. What fine-tuning gives is checked for itself:
every convolution and the classifier moved from where they started (a learning rate above 0 and one step change each
of them), and the linearised model the plan leaves merges exactly -- merged and fine-tuned outputs agree in float64 to
1e-9 at an even and an odd input size (the padding moved in front of each linear block, `docs/merging.md`). A plan
for another model is refused in one line that names both models and what to use, before anything trains.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch
from torch import nn

from dsprof.lut import MergeChoice
from dsprof.merging import merge_model
from dsprof.models import ModelRef, find_blocks
from dsprof.records.plan import Plan, PlanError
from dsprof.search import TrainConfig, TrainRun, finetune
from models.tinyconv import build

TINY_FILE = str(Path(__file__).parent / "models" / "tinyconv.py") + ":build"
MYNET = str(Path(__file__).parent / "models" / "mynet.py") + ":build"
KEEP = (1, 0, 1)  # block 1 (8 -> 16 channels, stride 2) linearised; the MACs rule merges it (fewer MACs merged)
TRAIN = TrainConfig(epochs=1, max_batches=2, max_eval_batches=1, batch_size=16)
MACS = MergeChoice.macs()
pytestmark = pytest.mark.usefixtures("one_thread")


def _state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _same_model(a: nn.Module, b: nn.Module) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert list(sa) == list(sb)
    for k, v in sa.items():
        torch.testing.assert_close(sb[k], v, rtol=0, atol=0, msg=k)


def _weights(model: nn.Module) -> list[torch.Tensor]:
    """The weights of every convolution and Linear layer, in the order the model holds them."""
    return [m.weight.detach() for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]


def _merges_exactly(result) -> None:
    """The fine-tuned (linearised) model and its merge compute the same logits in float64, to 1e-9."""
    tuned = copy.deepcopy(result.model).cpu().double().eval()
    merged = merge_model(tuned, result.merges.plan, input_size=(32, 32))
    assert sum(isinstance(m, nn.Conv2d) for m in merged.modules()) < sum(isinstance(m, nn.Conv2d) for m in tuned.modules())
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for size in (32, 33):
            x = torch.randn(2, 3, size, size, generator=g, dtype=torch.float64)
            torch.testing.assert_close(merged(x), tuned(x), rtol=0, atol=1e-9)


def test_a_model_file_is_the_same_model_whatever_it_is_named_by(tmp_path):
    """The file as ``PATH.py:factory`` beside its plan (refused before: the plan's model was compared with the path),
    as a `ModelRef`, and named by the plan alone (its JSON text): one model, trained the same."""
    ref = ModelRef.of(TINY_FILE)  # registers the file: a plan may name it now
    plan = Plan(ref.name, KEEP)
    by_path = finetune(plan, model=TINY_FILE, config=TRAIN, run=TrainRun("cpu", tmp_path / "a.pt"), merge=MACS)
    by_ref = finetune(plan, model=ref, config=TRAIN, run=TrainRun("cpu"), merge=MACS)
    by_plan = finetune(plan.to_json(), config=TRAIN, run=TrainRun("cpu"), merge=MACS)
    _same_model(by_path.model, by_ref.model)
    _same_model(by_path.model, by_plan.model)
    assert by_path.merges.plan.merge == (False, True, False)
    saved = torch.load(tmp_path / "a.pt", weights_only=True)
    assert (saved["model"], saved["resolution"], Plan.from_json(saved["plan"]).keep) == ("file:tinyconv:build", 32, KEEP)
    _merges_exactly(by_path)


def test_a_module_trains_as_its_file_does_and_is_left_as_given(tmp_path):
    """A module passed as an object, and the same architecture from its file with the same starting weights (a
    checkpoint): the same fine-tuned model; the object itself is trained on a copy. On the 'shapes' data, whose
    training images are not shifted at random: the digits' shifts draw from torch's generator, which building a
    model from its file (its random initialisation) has moved on and copying an object has not."""
    torch.manual_seed(3)
    net = build()
    start = tmp_path / "start.pt"
    torch.save(net.state_dict(), start)
    before = _state(net)
    plan = Plan(ModelRef.of(net).name, KEEP)
    tuned = finetune(plan, model=net, data="shapes", config=TRAIN, run=TrainRun("cpu", tmp_path / "m.pt"), merge=MACS)
    from_file = finetune(Plan(ModelRef.of(TINY_FILE).name, KEEP), model=ModelRef.of(TINY_FILE, weights=start),
                         data="shapes", config=TRAIN, run=TrainRun("cpu"), merge=MACS)
    _same_model(tuned.model, from_file.model)
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())  # the object is as it was given
    moved = [float((a - b).abs().max()) for a, b in zip(_weights(tuned.model), _weights(net))]
    assert len(moved) == 3 * 3 + 2 and min(moved) > 0  # the stem, 3 convolutions a block, the head: all trained
    saved = torch.load(tmp_path / "m.pt", weights_only=True)
    assert (saved["model"], saved["resolution"]) == ("TinyConv", 32)
    assert tuned.merged_max_abs_diff < 1e-4  # the check finetune makes itself, in float32
    _merges_exactly(tuned)


def test_a_library_model_by_its_name(tmp_path):
    """``timm:test_efficientnet`` (timm's own test network), named by its plan alone: trained at 32 px on the digits,
    recorded under its library name, merged exactly."""
    ref = ModelRef.of("timm:test_efficientnet", resolution=32)
    n_blocks = len(find_blocks(ref.build(num_classes=10)))
    plan = Plan(ref.name, (0, 0) + (1,) * (n_blocks - 2))  # its first two blocks linearised
    result = finetune(plan, config=TRAIN, run=TrainRun("cpu", tmp_path / "t.pt"), merge=MACS)
    saved = torch.load(tmp_path / "t.pt", weights_only=True)
    assert (saved["model"], saved["resolution"], saved["num_classes"]) == ("timm:test_efficientnet", 32, 10)
    assert result.merges.plan.merge[:2] == (True, True)
    _merges_exactly(result)


def test_a_plan_for_another_model_is_refused_in_one_line_before_training(tmp_path):
    net = build()
    ModelRef.of(TINY_FILE), ModelRef.of(MYNET)
    cases = [
        (Plan("mobilenet_v2", (1,) * 17), net,
         "the plan is for model 'mobilenet_v2', not 'TinyConv': use it with the plan's model (`model='mobilenet_v2'`)"),
        (json.dumps({"model": "file:mynet:build", "keep": [0, 1, 1, 1, 1]}), TINY_FILE,
         "the plan is for model 'file:mynet:build', not 'file:tinyconv:build': use it with the plan's model"),
    ]
    for plan, model, said in cases:
        with pytest.raises(PlanError) as caught:
            finetune(plan, model=model, config=TRAIN, run=TrainRun("cpu", tmp_path / "f.pt"), merge=MACS)
        message = str(caught.value)
        assert said in message and "\n" not in message
    assert not (tmp_path / "f.pt").exists()  # refused before any epoch


def test_a_bad_checkpoint_names_the_finetune_that_writes_a_good_one(tmp_path):
    """`dsprof.merge` refusing a file that is no checkpoint names the function that writes one, as it is imported."""
    import dsprof.search
    from dsprof.errors import DsprofError
    from dsprof.workflows.merge import checkpoint_facts

    bad = tmp_path / "bad.pt"
    bad.write_text("not a checkpoint")
    with pytest.raises(DsprofError, match=r"`dsprof\.search\.finetune\(run=TrainRun\(checkpoint=\)\)`"):
        checkpoint_facts(bad)
    assert dsprof.search.finetune is finetune


def test_a_checkpoint_for_other_classes_is_fine_tuned_from_its_features_with_a_new_classifier(tmp_path):
    """A user's checkpoint of 1000 classes, fine-tuned on data of 10: its features are kept and the classifier made
    afresh, as published weights and a module passed as an object are. From a model file it was refused ("build the
    model with num_classes=1000", which `finetune` has no parameter for)."""
    torch.manual_seed(5)
    start = tmp_path / "imagenet.pt"
    checkpoint = build(num_classes=1000).state_dict()
    torch.save(checkpoint, start)
    tuned = finetune(Plan(ModelRef.of(TINY_FILE).name, KEEP), model=ModelRef.of(TINY_FILE, weights=start),
                     data="shapes", config=TRAIN, run=TrainRun("cpu"), merge=MACS)
    head = [m for m in tuned.model.modules() if isinstance(m, nn.Linear)][-1]
    assert head.out_features == 10
    fresh = build(num_classes=10).state_dict()
    trained = tuned.model.state_dict()
    # every convolution kept: two batches at the training rate move it far less than a fresh start lies from it
    convs = [k for k, v in checkpoint.items() if v.ndim == 4 and k in trained]
    assert len(convs) >= 4
    for k in convs:
        assert float((trained[k] - checkpoint[k]).norm()) < 0.2 * float((fresh[k] - checkpoint[k]).norm()), k
