"""`dsprof measure` as real processes meet them: a second run on the same file, a full disk, Ctrl-C.

Each test runs the console script in subprocesses (mobilenet_v2 at 32 px, a few blocks, tiny timing
budgets; the refused second run, which meets the first run's process only through the file's lock, in this
process), then `--resume` in this process, and checks from the file that every workload was measured
exactly once and that what was written before the trouble is still there, line for line.
"""

from __future__ import annotations

import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_run import dsprof_here
from dsprof.cli import main
from dsprof.records.measurement import read_measurements

DSPROF = str(Path(sys.executable).parent / "dsprof")
DIE_AFTER = str(Path(__file__).parent / "die_after.py")
FAST = ["--resolution", "32", "--threads", "1", "--warmup", "0", "--max-warmup", "0.05", "--min-samples", "3", "--max-samples", "4",
        "--budget", "0.01", "--min-sample-time", "0", "--no-progress"]
FOUR_BLOCKS = ["--blocks", "features.1,features.2,features.3,features.4", "--model-variants", "none"]
VARIANTS = ("original", "merged", "flops_matched", "linear")  # PyTorch eager's default (docs/measuring.md, "Variants")
pytestmark = pytest.mark.usefixtures("one_thread")


def expected_keys(n_blocks: int) -> list[tuple[str, str]]:
    return [(f"features.{i}", v) for i in range(1, n_blocks + 1) for v in VARIANTS]


def measured_once(out: Path) -> list[tuple[str, str]]:
    """The (block, variant) of every record, after checking that none is repeated and all succeeded (the drift
    probe is timed again after every group, by design)."""
    records = read_measurements(out)
    keys = [r.workload_key for r in records if r.scope != "probe"]
    assert len(keys) == len(set(keys)), "a workload was measured twice"
    assert all(r.ok for r in records)
    return [(r.name, r.variant) for r in records if r.scope == "block"]


def _sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interruptible(argv: list[str]) -> subprocess.Popen:
    """Start ``argv`` as a terminal would, Ctrl-C delivered: a job started in the background (``cmd &``, nohup, some CI
    runners) inherits SIGINT ignored, and Python then installs no KeyboardInterrupt handler in the child."""
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_sigint_default)


def wait_for_lines(out: Path, proc: subprocess.Popen, n: int = 1, timeout_s: float = 240) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if out.exists() and out.read_bytes().count(b"\n") >= n:
            return
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        time.sleep(0.02)
    raise AssertionError(f"{out} got no record in {timeout_s} s")


@pytest.mark.slow
def test_a_second_run_on_a_file_being_written_is_refused_and_resume_works_after(tmp_path):
    out, go = tmp_path / "run.jsonl", tmp_path / "go"
    # The first run holds after its first group of records is on disk (and its lock taken) until `go` exists.
    first = subprocess.Popen([sys.executable, DIE_AFTER, "--pause", str(go), "dsprof.records.measurement:MeasurementWriter.write",
                              "1", "measure", "--out", str(out), *FAST, *FOUR_BLOCKS],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_lines(out, first, 3)
        held = out.read_bytes()
        # the user who thinks the first run died, either way: the command in this process (tests/cli_run.py), the
        # lock held by the first run's process
        for flag in ("--resume", "--overwrite"):
            second = dsprof_here("measure", "--out", out, flag, *FAST, *FOUR_BLOCKS)
            err = second.stderr
            assert second.returncode == 2, err[-2000:]
            assert "is being written by another dsprof run" in err and "--resume" in err
            assert "Traceback" not in err
        assert out.read_bytes() == held  # nothing interleaved, nothing truncated
    finally:
        go.touch()
        _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err[-2000:]
    assert main(["measure", "--out", str(out), "--resume", *FAST, *FOUR_BLOCKS]) == 0  # a complete file: nothing to do
    assert out.read_bytes().startswith(held)
    assert measured_once(out) == expected_keys(4)


def test_a_full_disk_mid_run_keeps_whole_records_and_resume_continues(tmp_path):
    out, probe = tmp_path / "run.jsonl", tmp_path / "probe.jsonl"
    assert main(["measure", "--out", str(probe), *FAST, "--blocks", "features.1", "--model-variants", "none"]) == 0
    limit = int(2.5 * probe.stat().st_size)  # bytes: two groups of four records fit, the third does not

    def small_disk() -> None:  # in the child: writes past `limit` bytes fail with EFBIG (Python ignores SIGXFSZ)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    full = subprocess.run([DSPROF, "measure", "--out", str(out), *FAST, *FOUR_BLOCKS], capture_output=True,
                          text=True, timeout=300, preexec_fn=small_disk)
    assert full.returncode == 2, full.stderr[-2000:]
    last = full.stderr.strip().splitlines()[-1]
    assert last.startswith("dsprof measure: error: cannot write") and "File too large" in last, full.stderr[-2000:]
    data = out.read_bytes()
    # two groups: 8 block records and the drift probe timed after each
    kept = data.count(b"\n")
    assert f"keeps the {kept} records written before" in last and "--resume" in last
    assert "Traceback" not in full.stderr
    assert data.endswith(b"\n") and len(data) <= limit  # cut back to the last whole record
    assert measured_once(out) == expected_keys(2)
    assert main(["measure", "--out", str(out), "--resume", *FAST, *FOUR_BLOCKS]) == 0
    assert out.read_bytes().startswith(data)
    assert measured_once(out) == expected_keys(4)


def test_ctrl_c_says_what_is_saved_exits_130_and_resume_measures_the_rest_once(tmp_path):
    out = tmp_path / "run.jsonl"
    args = ["measure", "--out", str(out), *FAST, "--model-variants", "none"]  # all 17 blocks: 68 workloads
    run = interruptible([DSPROF, *args])
    wait_for_lines(out, run, 3)
    run.send_signal(signal.SIGINT)
    _, err = run.communicate(timeout=300)
    assert run.returncode == 130, err[-2000:]
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    saved = out.read_bytes()
    n = sum(1 for line in saved.splitlines() if b'"scope": "probe"' not in line and b'"scope":"probe"' not in line)
    assert saved.endswith(b"\n") and 3 <= n < 68  # workloads; the drift probe's records are not workloads
    assert lines[-1] == f"dsprof measure: interrupted: {n} of 68 workloads saved in {out}; --resume continues"
    assert main([*args, "--resume"]) == 0
    assert out.read_bytes().startswith(saved)  # nothing written before the interrupt lost or rewritten
    assert measured_once(out) == expected_keys(17)


def test_resume_and_overwrite_together_are_refused(capsys, tmp_path):
    out = tmp_path / "run.jsonl"
    assert main(["measure", "--out", str(out), "--resume", "--overwrite", *FAST, *FOUR_BLOCKS]) == 2
    assert "give one of them" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.slow
def test_ctrl_c_in_finetune_names_the_checkpoint_and_resume_finishes(tmp_path):
    from dsprof.search.training import load_training_checkpoint

    ckpt = tmp_path / "ft.pt"
    mynet = str(Path(__file__).parent / "models" / "mynet.py") + ":build"
    args = ["finetune", "--model-file", mynet, "--epochs", "3", "--max-batches", "10", "--max-eval-batches", "1",
            "--batch-size", "16", "--device", "cpu", "--no-merge-check", "--out", str(ckpt)]
    run = interruptible([DSPROF, *args])
    deadline = time.monotonic() + 240
    while not ckpt.exists():  # the first epoch's checkpoint (written atomically: it exists whole or not at all)
        assert run.poll() is None and time.monotonic() < deadline, run.communicate()[1][-2000:]
        time.sleep(0.02)
    run.send_signal(signal.SIGINT)
    _, err = run.communicate(timeout=300)
    assert run.returncode == 130, err[-2000:]
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == (f"dsprof finetune: interrupted: {ckpt} holds the epochs finished; "
                                            "the same command with --resume continues")
    done = int(load_training_checkpoint(ckpt)["epoch"])
    assert 1 <= done < 3
    assert main([*args, "--resume"]) == 0
    assert int(load_training_checkpoint(ckpt)["epoch"]) == 3


def test_a_traced_model_that_breaks_on_other_channels_is_named_without_a_traceback(capfd):
    """The FLOPs-matched whole model of a model rewritten as a graph (chains no module owns) can break where a part
    that is no block takes the original channels; torch.fx printed its own traceback to stderr before dsprof's one
    line (timm's MobileNetV4 at 32 px). The probe keeps it to itself and names the layer."""
    import torch
    import torch.fx as fx
    from torch import nn

    from dsprof.profiler.workloads import _channel_break

    class Two(nn.Module):  # two branches of 8 and 16 channels added: the traced forward's own line fails
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Conv2d(3, 8, 1), nn.Conv2d(3, 16, 1)

        def forward(self, x):
            return self.a(x) + self.b(x)

    assert _channel_break(fx.symbolic_trace(Two()), torch.zeros(1, 3, 8, 8)) == "b"
    assert capfd.readouterr().err == ""
