import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from dsprof import __version__
from dsprof.cli import main

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
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 5 and lines[0].startswith("resnet101")
