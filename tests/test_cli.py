import subprocess
import sys
from pathlib import Path

import pandas as pd
import torch

from dsprof import __version__
from dsprof.cli import main
from dsprof.records.plan import Plan

DSPROF = str(Path(sys.executable).parent / "dsprof")
SUBCOMMANDS = ["measure", "build-lut", "predict", "search", "finetune", "merge", "report"]


def run(*args):
    return subprocess.run([DSPROF, *args], capture_output=True, text=True, timeout=300)


def test_console_script_help_lists_the_subcommands():
    result = run("--help")
    assert result.returncode == 0
    for name in SUBCOMMANDS + ["models", "blocks"]:
        assert name in result.stdout


def test_version():
    result = run("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"dsprof {__version__}"


def test_blocks_prints_and_writes_csv(tmp_path, capsys):
    out = tmp_path / "blocks.csv"
    assert main(["blocks", "--model", "mobilenet_v2", "--width", "1.4", "--resolution", "64", "--csv", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "features.17" in printed and "17 blocks" in printed
    table = pd.read_csv(out)
    assert len(table) == 17
    assert table.loc[1, "spec"] == "inverted_residual(cin=24,hidden=144,cout=32,k=3,s=2,pad=symmetric,res=0,in=32x32)"


def test_blocks_unknown_model_is_a_clear_error(capsys):
    assert main(["blocks", "--model", "mobilenet_v9"]) == 2
    err = capsys.readouterr().err
    assert "unknown model 'mobilenet_v9'" in err and "mobilenet_v2" in err


def test_blocks_option_for_another_model_is_a_clear_error(capsys):
    assert main(["blocks", "--model", "resnet18", "--depths", "1,1,1,1,1,1,1"]) == 2
    assert "no option(s) depths" in capsys.readouterr().err


def test_models_lists_with_pattern(capsys):
    assert main(["models", "resnet*"]) == 0
    shown = capsys.readouterr()
    lines = shown.out.splitlines()
    assert len(lines) == 5 and lines[0].startswith("resnet101")
    assert "timm:NAME, torchvision:NAME" in shown.err


# -- --weights: one meaning for every command ---------------------------------------------------------

TINY_ARGS = ["--model", "mobilenet_v2", "--width", "0.35", "--depths", "1,1,1,1,1,1,1"]
TINY_PLAN = Plan("mobilenet_v2", (1, 0, 1, 1, 0, 1, 1), {"width": 0.35, "depths": [1] * 7}).to_json()


def _weights_commands(weights: str, tmp_path) -> dict[str, list[str]]:
    """blocks, merge and finetune of the tiny MobileNetV2 (10 classes where the command has a choice)."""
    return {
        "blocks": ["blocks", *TINY_ARGS, "--resolution", "32", "--weights", weights],
        "merge": ["merge", *TINY_ARGS, "--resolution", "32", "--num-classes", "10", "--plan", TINY_PLAN,
                  "--merge-by", "macs", "--weights", weights, "--out", str(tmp_path / "merged.pt")],
        "finetune": ["finetune", *TINY_ARGS, "--weights", weights, "--epochs", "1", "--lr", "0", "--batch-size", "16",
                     "--max-batches", "1", "--max-eval-batches", "1", "--no-merge-check", "--device", "cpu",
                     "--out", str(tmp_path / "ft.pt")],
    }


def test_weights_option_is_parsed_the_same_by_every_command(tmp_path):
    from dsprof.cli import build_parser
    from dsprof.cli.options import weights_from_args

    parser = build_parser()
    commands = _weights_commands("pretrained", tmp_path)
    commands["search"] = ["search", *TINY_ARGS, "--keep", "3", "--out", "p.json", "--weights", "pretrained"]
    for name, argv in commands.items():
        assert weights_from_args(parser.parse_args(argv)) is True, name
        assert weights_from_args(parser.parse_args([a if a != "pretrained" else "w.pt" for a in argv])) == "w.pt", name
        without = argv[: argv.index("--weights")] + argv[argv.index("--weights") + 2:]
        assert weights_from_args(parser.parse_args(without)) is False, name  # random initialisation


def test_a_local_weights_file_is_read_by_blocks_merge_and_finetune(tmp_path, capsys):
    from dsprof.merging import load_merged
    from dsprof.models import get_model

    # a state dict of another model: each command must load the path, and refuse it the same way
    foreign = tmp_path / "foreign.pt"
    torch.save({"other.weight": torch.zeros(3)}, foreign)
    for name, argv in _weights_commands(str(foreign), tmp_path).items():
        assert main(argv) == 2, name
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"dsprof {name}: error: checkpoint {foreign} does not fit this model"), err
        assert len(err.splitlines()) == 1
    # one that fits (10 classes): merge and finetune start from exactly its weights (lr 0: fine-tuning moves none)
    torch.manual_seed(3)
    fitting = get_model("mobilenet_v2", resolution=32, num_classes=10, width=0.35, depths=[1] * 7).state_dict()
    path = tmp_path / "w10.pt"
    torch.save(fitting, path)
    commands = _weights_commands(str(path), tmp_path)
    assert main(commands["merge"]) == 0 and main(commands["finetune"]) == 0
    head = "classifier.1.weight"  # not merged, not trained at lr 0
    torch.testing.assert_close(load_merged(tmp_path / "merged.pt").state_dict()[head], fitting[head], rtol=0, atol=0)
    tuned = torch.load(tmp_path / "ft.pt", weights_only=True)["state_dict"]
    torch.testing.assert_close(tuned[head], fitting[head], rtol=0, atol=0)
    torch.testing.assert_close(tuned["features.0.0.weight"], fitting["features.0.0.weight"], rtol=0, atol=0)
    # blocks takes a file that fits its model (the 1000-class head it builds)
    whole = tmp_path / "w1000.pt"
    torch.save(get_model("mobilenet_v2", resolution=32, width=0.35, depths=[1] * 7).state_dict(), whole)
    assert main(_weights_commands(str(whole), tmp_path)["blocks"]) == 0
    assert "7 blocks" in capsys.readouterr().out


def test_a_checkpoint_for_other_classes_is_built_with_num_classes_by_every_command_that_reads_a_model(tmp_path, capsys):
    """A fine-tune on 10 classes given to blocks or plan: refused in one line that names the option which builds the
    model with its classes, --num-classes 10 (every command that reads a model takes it); given that, it loads. Its
    classifier is 10x(last width), as the architecture makes it: mobilenet_v2 at width 0.35 ends in 1280 channels."""
    from dsprof.models import get_model

    path = tmp_path / "w10.pt"
    torch.save(get_model("mobilenet_v2", resolution=32, num_classes=10, width=0.35, depths=[1] * 7).state_dict(), path)
    argv = ["blocks", *TINY_ARGS, "--resolution", "32", "--weights", str(path)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"dsprof blocks: error: checkpoint {path} is for 10 classes (classifier.1.weight is 10x1280), the "
                   "model has 1000; build the model with its 10 classes: --model mobilenet_v2 --width 0.35 --depths "
                   "1,1,1,1,1,1,1 --num-classes 10 --resolution 32")
    assert main([*argv, "--num-classes", "10"]) == 0
    assert "7 blocks" in capsys.readouterr().out
    for wrong in ("0", "-3"):  # one line naming the option, not a traceback from the classifier's shape
        assert main([*argv, "--num-classes", wrong]) == 2
        assert capsys.readouterr().err.strip() == (f"dsprof blocks: error: --num-classes {wrong}: give the classifier's "
                                                   "classes, 1 or more")
    import argparse

    from dsprof.cli import build_parser

    commands = next(a.choices for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    reading = {name for name, sub in commands.items() if "--model" in sub._option_string_actions}
    assert {"blocks", "measure", "plan", "predict", "explain", "export", "importance", "search", "finetune",
            "merge"} <= reading
    for name in reading:
        assert "--num-classes" in commands[name]._option_string_actions, name



def test_the_parser_main_keeps_leaves_no_value_of_one_command_in_the_next():
    # `main` builds its parser once a process: no option's value (a list above all) may stay for the next call
    from dsprof.cli import build_parser
    from dsprof.cli.main import _parse, _parser

    first = _parse(["report", "r", "--plans", "A", "B", "--front", "f"])
    assert (first.plans, [str(f) for f in first.front]) == (["A", "B"], ["f"])
    bare = _parse(["report", "r"])
    bare.plans.append("C")  # a command changing the default list it was given
    assert vars(_parse(["report", "r"])) == vars(build_parser().parse_args(["report", "r"]))
    assert _parse(["report", "r", "--plans", "D"]).plans == ["D"] and _parser() is _parser()
