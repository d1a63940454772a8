"""Importance proxies (issue #30): each ranks an inert block last, their files feed `dsprof plan`, and a file for
another model is refused.

The test model (tests/models/inert.py) is a small MobileNetV2-like network whose block 0 has an inert activation:
non-negative weights and biases 1 keep the ReLU6 inside it, and the free ReLU6 that linearising puts after it, on
inputs in [1, 4] and [1.5, 3] (the proof is in that file's docstring). It is trained here with block 0 frozen, so
the bound holds for the model the proxies score: removing block 0's activations changes nothing, and every proxy
must rank it last, at zero up to float rounding.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import dsprof
from dsprof.cli import build_parser, main
from dsprof.cli.commands import hint_command
from dsprof.cli.main import _text
from dsprof.names import DEFAULT_PROXY as NAMED_DEFAULT, PROXY_NAMES
from dsprof.errors import UsageError
from dsprof.lut import build_lut
from dsprof.records.plan import Plan
from dsprof.models import ModelRef, get_model
from dsprof.models.user_model import register_model_file
from dsprof.workflows.plan import load_importance, plan_to_file
from dsprof.profiler import Workloads, measure
from dsprof.search import TrainConfig, TrainRun, search
from dsprof.search.data import digits
from dsprof.search.importance import importance_record
from dsprof.records.importance import write_importance
from dsprof.search.proxies import DEFAULT_PROXY, PROXIES, ProxySettings, proxy_input, score_blocks
from rule_lut import rule_lut
from fast_timing import FAST

pytestmark = pytest.mark.usefixtures("one_thread")
SPEC = str(Path(__file__).parent / "models" / "inert.py") + ":build"
RES = 16
N_BLOCKS = 5
SETTINGS = ProxySettings(batches=4, eval_batches=6, steps=10, batch_size=64, seed=0)
FINETUNE = TrainConfig(epochs=1, lr=0.02, max_batches=6, seed=0)


@pytest.fixture(scope="module")
def model_name():
    return register_model_file(SPEC)


@pytest.fixture(scope="module")
def inert_model(model_name, tmp_path_factory):
    """The inert network trained 5 epochs on digits at 16 px with block 0 frozen; its checkpoint file."""
    torch.manual_seed(0)
    model = get_model(model_name, resolution=RES, num_classes=10)
    frozen = {k: v.clone() for k, v in model.blocks[0].state_dict().items()}
    for p in model.blocks[0].parameters():
        p.requires_grad_(False)
    data = digits(RES)
    loader = torch.utils.data.DataLoader(data.train, batch_size=64, shuffle=True,
                                         generator=torch.Generator().manual_seed(0))
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.02, momentum=0.9, weight_decay=4e-5)
    model.train()
    for _ in range(5):
        for x, y in loader:
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
    model.eval()
    assert all(torch.equal(frozen[k], v) for k, v in model.blocks[0].state_dict().items())
    with torch.no_grad():
        xs, ys = map(torch.stack, zip(*[data.val[i] for i in range(len(data.val))]))
        assert float((model(xs).argmax(1) == ys).float().mean()) > 0.8  # trained: its blocks matter
    path = tmp_path_factory.mktemp("inert") / "inert.pt"
    torch.save(model.state_dict(), path)
    return path


@pytest.fixture(scope="module")
def scored(model_name, inert_model):
    """Every proxy's scores of the inert model."""
    out = {}
    for name in PROXIES:
        inp = proxy_input(ModelRef.of(model_name, resolution=RES), name, weights=inert_model, data="digits",
                          settings=SETTINGS, config=FINETUNE)
        out[name] = (score_blocks(name, inp), inp)
    return out


@pytest.mark.parametrize("proxy", list(PROXIES))
def test_each_proxy_ranks_the_inert_block_least_important(scored, proxy):
    result, _ = scored[proxy]
    scores = result.scores
    assert len(scores) == N_BLOCKS and all(map(torch.isfinite, torch.tensor(scores)))
    assert result.ranking[-1] == 0, (proxy, scores)
    others = min(scores[1:])
    assert scores[0] < others, (proxy, scores)
    # removing an identity changes nothing: the inert block's score is zero up to float rounding (and the
    # full measurement's to a fraction of one validation image: its two fine-tunes differ in rounding only)
    tolerance = {"finetune": 2 / 359, "short-finetune": 1e-4}.get(proxy, 1e-6)
    assert abs(scores[0]) <= tolerance * max(1.0, abs(others)), (proxy, scores)
    assert result.seconds > 0 and set(result.settings) >= set(PROXIES[proxy].reads) - {"seed"}


def test_the_label_free_proxies_read_no_labels_and_taylor_changes_no_weight(model_name, inert_model):
    """Shuffled labels leave output-distance and logit-distance unchanged (they read images only)."""
    inp = proxy_input(ModelRef.of(model_name, resolution=RES), "output-distance", weights=inert_model,
                      data="digits", settings=SETTINGS)
    before = {name: score_blocks(name, inp).scores for name in ("output-distance", "logit-distance")}
    shuffle = torch.Generator().manual_seed(1)
    inp._train = [(x, y[torch.randperm(len(y), generator=shuffle)]) for x, y in inp._train]
    inp._val = [(x, y[torch.randperm(len(y), generator=shuffle)]) for x, y in inp._val]
    for name, scores in before.items():
        assert score_blocks(name, inp).scores == pytest.approx(scores, rel=1e-9)
    before = {k: v.clone() for k, v in inp.model.state_dict().items()}
    score_blocks("taylor", inp)
    assert all(torch.equal(before[k], v) for k, v in inp.model.state_dict().items())


@pytest.fixture(scope="module")
def lut(model_name, tmp_path_factory):
    """A real LUT of the inert network at 16 px on this CPU (short timing; no span entries), with the medians of
    tests/rule_lut.py's rule: whether the planner accepts it, and which blocks it holds back, must not hang on a
    busy machine's clock."""
    tmp = tmp_path_factory.mktemp("importance-lut")
    result = measure(ModelRef.of(model_name, resolution=RES),
                     workloads=Workloads(variants=("original", "merged", "linear"), model_variants=("original",)),
                     timing=FAST, out=tmp / "tiny.jsonl", progress=False)
    path = build_lut([result.path]).save(tmp / "tiny.csv")
    rule_lut(path, result.path)
    return path


@pytest.mark.parametrize("proxy", list(PROXIES))
def test_dsprof_plan_takes_every_proxys_file(scored, lut, tmp_path, proxy, capsys):
    result, inp = scored[proxy]
    path = write_importance(tmp_path / f"{proxy}.json", importance_record(result, inp))
    out = tmp_path / "front.json"
    assert main(["plan", "--model-file", SPEC, "--resolution", str(RES), "--lut", str(lut), "--importance", str(path),
                 "--keep", "3", "--max-span", "1", "--out", str(out)]) == 0
    plan = Plan.coerce(str(out.with_suffix(".plan.json")))
    # the planner's least summed importance with 3 kept blocks: independently, a top 3 of the scores
    kept = [s for s, k in zip(result.scores, plan.keep) if k]
    dropped = [s for s, k in zip(result.scores, plan.keep) if not k]
    assert len(kept) == 3 and min(kept) >= max(dropped) and plan.keep[0] == 0
    record = json.loads(path.read_text())
    assert record["proxy"]["name"] == proxy and record["cost"]["seconds"] == result.seconds
    assert record["model"]["name"] == "file:inert:build" and record["model"]["options"] == {}
    assert len(record["model"]["blocks"]) == N_BLOCKS and record["model"]["weights_sha256"]


def test_a_proxy_file_for_another_model_is_refused(scored, lut, tmp_path, capsys):
    result, inp = scored["taylor"]
    path = write_importance(tmp_path / "taylor.json", importance_record(result, inp))
    assert main(["plan", "--model", "mobilenet_v2", "--depths", "1,1,1,1,1,1,1", "--resolution", str(RES), "--lut",
                 str(lut), "--importance", str(path), "--keep", "3", "--out", str(tmp_path / "f.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert (len(err.splitlines()) == 1 and "is for --model-file" in err
            and "inert.py:build, not --model mobilenet_v2" in err)
    # the same model with other options (MobileNetV2 of another width): refused in one line, with a command that
    # measures it for the plan's model and runs as written
    record = {**importance_record(result, inp), "model": {"name": "mobilenet_v2", "options": {"width": 0.35}}}
    other = write_importance(tmp_path / "mbv2.json", record)
    with pytest.raises(UsageError) as err:
        load_importance(other, ModelRef.of("mobilenet_v2", options={"width": 0.5, "depths": [1] * 7}))
    message = str(err.value)  # for a Python caller the command in words, for the command line the command itself
    assert "\n" not in message and ("is for `model=ModelRef.of('mobilenet_v2', options={'width': 0.35})`, "
                                    "not `model=ModelRef.of('mobilenet_v2', options={'width': 0.5, 'depths': [1, 1, 1, "
                                    "1, 1, 1, 1]})`") in message
    assert ("e.g. `dsprof importance` (or dsprof.importance) for the model (model=ModelRef.of('mobilenet_v2', "
            "options={'width': 0.5, 'depths': [1, 1, 1, 1, 1, 1, 1]})) on") in message
    assert ("is for --model mobilenet_v2 --width 0.35, not --model mobilenet_v2 --width 0.5 --depths"
            in _text(err.value, "plan"))
    command = hint_command(err.value.hint).split()
    assert command[:2] == ["dsprof", "importance"] and command[command.index("--width") + 1] == "0.5"
    build_parser().parse_args(command[1:])
    assert "--weights" not in command and "weights=" not in message  # no weights given: none named, no placeholder
    # the weights the plan's model is built from travel in the hint: said in words, and as the command's option
    with pytest.raises(UsageError) as err:
        load_importance(other, ModelRef.of("mobilenet_v2", options={"width": 0.5}, resolution=32, weights=True))
    assert str(err.value).endswith("options={'width': 0.5})) on digits with the proxy taylor, from pretrained weights")
    command = hint_command(err.value.hint).split()
    assert command[command.index("--weights") + 1] == "pretrained"
    build_parser().parse_args(command[1:])
    refused = re.escape("is for `model=ModelRef.of('mobilenet_v2', options={'width': 0.35})`")
    with pytest.raises(UsageError, match=refused):
        plan_to_file(ModelRef.of("mobilenet_v2", options={"width": 0.5}, resolution=RES), lut, importance=other, keep=3,
                     max_span=1)
    # the same options spelt with their defaults are the same model; the bare formats are read as they were
    same = ModelRef.of("mobilenet_v2", options={"width": 0.35, "num_classes": 10})
    assert load_importance(other, same) == dict(enumerate(result.scores))
    (tmp_path / "list.json").write_text(json.dumps(list(result.scores)))
    bare = load_importance(tmp_path / "list.json", ModelRef.of("mobilenet_v2", options={"width": 0.5}))
    assert bare == dict(enumerate(result.scores))


def test_dsprof_importance_writes_the_file_and_search_uses_the_proxy(model_name, inert_model, tmp_path, capsys):
    out = tmp_path / "importance.json"
    assert main(["importance", "--model-file", SPEC, "--resolution", str(RES), "--weights", str(inert_model),
                 "--data", "digits", "--proxy", "taylor", "--batches", "2", "--device", "cpu", "--out", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "blocks.0" in shown and f"wrote {out} (for `dsprof plan --importance`)" in shown  # the option, on the CLI
    record = json.loads(out.read_text())
    assert record["format"] == "dsprof.importance" and record["proxy"]["settings"]["batches"] == 2
    assert record["importance"][0] == 0.0 and record["ranking"][-1] == 0 and record["data"]["resolution"] == RES
    # the same through the Python function, and the importance search with that proxy
    found_fn = dsprof.importance(ModelRef.of(model_name, resolution=RES, weights=inert_model), proxy="taylor",
                                 settings=ProxySettings(batches=2), device="cpu", out=tmp_path / "api.json")
    scored_fn = found_fn.scores
    assert f"wrote {tmp_path / 'api.json'} (for `dsprof.plan(importance=)`)" in str(found_fn)  # the parameter, in Python
    assert list(scored_fn.scores) == pytest.approx(record["importance"], rel=1e-9)
    found = search(ModelRef.of(model_name, resolution=RES, weights=inert_model), keep=3, run=TrainRun(device="cpu"),
                   proxy="taylor", settings=ProxySettings(batches=2))
    assert found.plan.search["proxy"] == "taylor" and found.scores == pytest.approx(record["importance"], rel=1e-9)
    assert found.plan.keep[0] == 0 and sum(found.plan.keep) == 3
    with pytest.raises(UsageError, match="`method='importance'`"):
        search(ModelRef.of(model_name, resolution=RES), keep=3, method="random", proxy="taylor")


def test_the_command_line_names_the_registered_proxies():
    assert tuple(PROXY_NAMES) == tuple(PROXIES) and NAMED_DEFAULT == DEFAULT_PROXY
    importance = next(a for a in build_parser()._actions if a.dest == "command").choices["importance"]
    assert next(a for a in importance._actions if a.dest == "proxy").default == DEFAULT_PROXY


def test_block_counts_come_from_the_model_and_the_head_from_the_data(model_name, tmp_path):
    """Issue #30, item 5: no 10-class model built to count blocks; the ground truth's MACs use the data's head."""
    from PIL import Image

    from dsprof.search.build import block_count
    from dsprof.search.ground_truth import enumerate_plans, plan_macs

    assert block_count(ModelRef.of(model_name, resolution=RES)) == N_BLOCKS  # tests/models/inert.py: five blocks
    assert block_count(ModelRef.of("mobilenet_v2", options={"depths": [1, 2, 1, 1, 1, 1, 1]}, resolution=RES)) == 8
    g = torch.Generator().manual_seed(0)
    for split in ("train", "val"):
        for c in range(3):
            (tmp_path / split / f"c{c}").mkdir(parents=True)
            for i in range(2):
                pixels = (torch.rand(RES, RES, 3, generator=g) * 255).byte().numpy()
                Image.fromarray(pixels).save(tmp_path / split / f"c{c}" / f"{i}.png")
    options = {"width": 0.35, "depths": [1] * 7}
    keep = (1, 0, 1, 1, 1, 1, 1)
    (outcome,) = enumerate_plans("mobilenet_v2", k=6, options=options, weights=None, data=tmp_path, resolution=RES,
                                 config=TrainConfig(epochs=1, max_batches=1, batch_size=4), seeds=(0,), keeps=[keep],
                                 log=lambda _: None)
    # the classifier is a 1280 -> classes Linear: 3 classes cost 7 x 1280 MACs less than 10
    assert outcome.macs == plan_macs("mobilenet_v2", options, RES, keep, num_classes=10) - 7 * 1280
