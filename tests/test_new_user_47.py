"""Found by trying the merged work as a new user would (issues #44, #45, #47), each on real files: a regression test
per problem, the expected numbers worked out independently of the code under test."""

from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path

import pytest

from dsprof.records.measurement import read_measurements
from dsprof.profiler import summary_table
from dsprof.records.measurement import speedups

FIXTURES = Path(__file__).parent / "fixtures" / "reports"  # real profiler runs (make_report_fixtures.py)


def test_a_whole_models_speedup_pairs_with_its_own_groups_original_when_calibrate_times_it_again():
    """`measure --calibrate` times the whole model's original a second time, in the calibration group; the stem and
    head sit in the first group beside the flops-matched model. Seen on a re-parameterised MobileOne-S0: the table
    said the flops-matched model ran 0.01x (the flops-matched model over the stem). The speed-up is the median of the
    per-round ratios original / flops-matched of the first group, worked out here by hand."""
    records = read_measurements(FIXTURES / "tiny_torch.jsonl")
    model = {r.variant: r for r in records if r.scope == "model"}
    first = model["original"].group
    stem = dataclasses.replace(model["original"], scope="stem", samples_s=tuple(s / 50 for s in model["original"].samples_s))
    again = f"{first}-again"
    calibration = [dataclasses.replace(model["original"], group=again),
                   dataclasses.replace(model["flops_matched"], variant="calibration", group=again)]
    blocks = [r for r in records if r.scope == "block"]
    ordered = [*blocks, stem, model["original"], model["flops_matched"], *calibration]
    expected = statistics.median(o / f for o, f in zip(model["original"].samples_s, model["flops_matched"].samples_s))
    table = summary_table(ordered)
    (row,) = [row for _, row in table.iterrows() if (row["scope"], row["name"]) == ("model", "mobilenet_v2")]
    assert row["flops_matched_speedup"] == pytest.approx(expected, rel=1e-12)
    # the pairing itself: a variant is divided by the original of its own scope, whichever comes first in the group
    ups = speedups([stem, model["original"], model["flops_matched"]])
    assert ups[("model", "mobilenet_v2", "flops_matched")].value == pytest.approx(expected, rel=1e-12)


def test_a_keep_beyond_the_blocks_names_the_parameter_that_fixes_it():
    """`dsprof plan --keep 99` on RegNetY-400MF (16 blocks) said "keep=99 blocks, ..." to a command-line user: a
    parameter outside backquotes, which the command line cannot turn into its option. Each refusal names `keep=`
    with the range that 16 blocks allow, and the command line prints it as --keep."""
    import dsprof.cli.main  # noqa: F401  (reads the options from the parser)
    from dsprof.cli.flags import command_line_text
    from dsprof.errors import UsageError
    from dsprof.planning.front import resolve_k

    assert resolve_k(16, 16) == 16 and resolve_k(0.5, 16) == 8
    with pytest.raises(UsageError) as count:
        resolve_k(99, 16)
    assert str(count.value) == "`keep=99` blocks, but a plan keeps 0 to 16 of them; give `keep=` in 0..16, or a fraction in [0, 1]"
    assert command_line_text(str(count.value), "plan") == (
        "--keep 99 blocks, but a plan keeps 0 to 16 of them; give --keep in 0..16, or a fraction in [0, 1]")
    with pytest.raises(UsageError) as fraction:
        resolve_k(1.5, 16)
    assert command_line_text(str(fraction.value), "plan") == (
        "--keep 1.5: a fraction of the blocks lies in [0, 1]; give a count (from 0 to 16) as a whole number")


@pytest.mark.parametrize("flag, value, said", [
    ("--threads", "0", "dsprof measure: error: --threads 0: give 1 or more"),
    ("--batch", "0", "dsprof measure: error: --batch 0: give 1 or more images"),
    ("--resolution", "4", "dsprof measure: error: --resolution 4: give 8 pixels or more"),
    ("--budget", "0", "dsprof measure: error: --budget 0.0: give more than 0 seconds"),
    ("--target-precision", "5", "dsprof measure: error: --target-precision 5.0: give a fraction within (0, 1)"),
])
def test_a_setting_out_of_range_is_refused_with_the_option_that_sets_it(flag, value, said, tmp_path):
    """`dsprof measure --threads 0` said "threads must be >= 1, got 0": a parameter's name where the user typed an
    option. One line, with the option and the smallest value that works (1 thread, 1 image, 8 px: read from the
    checks), and nothing written."""
    from cli_run import dsprof_here

    done = dsprof_here("measure", "--model", "mobilenet_v2", "--depths", "1,1,1,1,1,1,1", "--resolution", "32",
                       flag, value, "--blocks", "none", "--out", tmp_path / "m.jsonl")
    assert done.returncode == 2 and done.stderr.strip() == said
    assert not (tmp_path / "m.jsonl").exists()
