"""benchmarks/planner_vs_random.py when one model's LUT prices no plan (its whole model failed on that runtime, as
timm's CondConv EfficientNet-B0 does on ONNX Runtime): that case is named as not scored, in one line, and the run
goes on to the next model instead of stopping with a traceback. A real LUT, measured here without the whole model
(the entry every plan's price needs), stands in the benchmark's folder as a LUT it measured before (``--reuse``)."""

from fast_timing import FAST
from test_time_pairs import load_script

from dsprof import build_lut, measure
from dsprof.models import ModelRef
from dsprof.profiler import BackendSettings, Workloads

RES = 32
MODELS = ("mobilenet_v2", "mnasnet0_5")  # two zoo models: the second is reached after the first is not scored


def test_a_case_whose_lut_prices_no_plan_is_named_and_the_run_goes_on(tmp_path, capsys):
    pvr = load_script("planner_vs_random")
    out = tmp_path / "pvr"
    for name in MODELS:
        case = out / "torch" / pvr.case_folder(f"zoo:{name}", RES)
        case.mkdir(parents=True)
        result = measure(ModelRef.of(name, resolution=RES), settings=BackendSettings(threads=1),
                         workloads=Workloads(variants=("original",), model_variants=()),
                         timing=FAST, out=tmp_path / f"{name}.jsonl",
                         progress=False)
        build_lut([result.run.path]).save(case / "lut.csv")
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}

    code = pvr.main(["--models", ",".join(f"zoo:{m}" for m in MODELS), "--backends", "torch",
                     "--resolution", str(RES), "--random", "1", "--check-seconds", "0.1", "--out", str(out), "--reuse"])

    printed = capsys.readouterr().out
    assert code == 0
    lines = [line for line in printed.splitlines() if "not scored:" in line]
    assert len(lines) == 2, printed  # one line per case, both models reached
    for name, line in zip(MODELS, lines):
        assert "its LUT prices no plan" in line and str(out / "torch" / pvr.case_folder(f"zoo:{name}", RES)) in line
    assert printed.splitlines()[-1].startswith("not scored (2 cases")
    assert "Traceback" not in printed
    for path, data in before.items():  # what was measured stays as it was
        assert path.read_bytes() == data
