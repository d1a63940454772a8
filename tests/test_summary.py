"""The answer's choice of k and its wording (`dsprof.reports.summary.front_answer`), on tables written by hand: which
measured plan is the planner's (its keep and spans are the front's at its k), which k is compared, and what is said
where nothing was measured."""

import math

import pandas as pd

from dsprof.reports.summary import front_answer

NAN = math.nan
POINTS = pd.DataFrame({"k": [0, 1, 2, 3], "keep": ["000", "100", "110", "111"], "spans": ["0-2", "1-2", "none", "none"],
                       "speedup": [1.80, 1.50, 1.20, 1.00], "speedup_low": [1.6, 1.4, 1.1, 1.0],
                       "speedup_high": [2.0, 1.6, 1.3, 1.0]})
PRESETS = pd.DataFrame({"name": ["p-b", "p-a"], "k": [2, 1], "speedup": [1.10, 1.25]})


def measured(*rows):
    columns = ["name", "k", "keep", "spans", "speedup", "speedup_low", "speedup_high"]
    return pd.DataFrame([("original", 3, "111", "none", 1.0, 1.0, 1.0), *rows], columns=columns)


def test_the_preset_measured_beside_the_planners_plan_decides_k():
    runs = measured(("front-k1", 1, "100", "1-2", 1.45, 1.40, 1.52), ("p-a", 1, "100", "none", 1.21, 1.18, 1.24),
                    ("p-b", 2, "010", "none", 1.05, 1.0, 1.1))
    lines = front_answer(POINTS, PRESETS, runs, "CPU X, PyTorch eager", "net 32px").lines()
    assert lines == ["On CPU X, PyTorch eager, net 32px:",
                     "DepthShrinker's plans run up to 1.80x faster (k = 0, predicted; 95 % 1.60-2.00x);",
                     "at k = 1 the planner's plan is 1.50x (measured 1.45x, 95 % 1.40-1.52x), the paper's preset P-A "
                     "1.25x (measured 1.21x, 95 % 1.18-1.24x);",
                     # every paired run is read (issue #37): the preset of another k too
                     "also measured beside the original: p-b (k = 2) 1.05x (95 % 1.00-1.10x)."]


def test_a_plan_with_other_spans_is_not_the_planners_and_unmeasured_plans_say_so():
    # front-k1 merged without the front's span: not the planner's plan; p-b (k = 2) is the only measured preset
    runs = measured(("mine", 1, "100", "none", 1.3, 1.2, 1.4), ("p-b", 2, "010", "none", 1.05, 1.0, 1.1))
    answer = front_answer(POINTS, PRESETS, runs, "D", "M")
    assert answer.k == 2 and answer.planner.measured is None and answer.preset.name == "p-b"
    assert answer.lines()[2:] == ["at k = 2 the planner's plan is 1.20x (not measured), the paper's preset P-B 1.10x "
                                  "(measured 1.05x, 95 % 1.00-1.10x);",
                                  "also measured beside the original: mine (k = 1) 1.30x (95 % 1.20-1.40x)."]
    # nothing measured, no presets: no k to compare
    bare = front_answer(POINTS, PRESETS.iloc[0:0], measured(), "D", "M")
    assert bare.k is None and "no plan of this front was measured" in bare.lines()[2]
    # an unbounded interval (a latency bound at zero) is said as such
    wide = front_answer(POINTS.assign(speedup_high=[math.inf, 1.6, 1.3, 1.0]), PRESETS, measured(), "D", "M")
    assert "95 % at least 1.60x" in wide.lines()[1]
