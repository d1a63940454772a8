"""dsprof's Python API: what each `dsprof` command runs, as documented functions that return objects (docs/api.md).

    import dsprof
    run = dsprof.measure("mobilenet_v2", resolution=64, out="results")            # `dsprof measure`
    lut = dsprof.build_lut(["results"], "lut.csv")                                # `dsprof build-lut`
    planned = dsprof.plan("mobilenet_v2", lut, resolution=64, keep=7, out="front.json")   # `dsprof plan`
    found = dsprof.predict("mobilenet_v2", lut, "front.plan.json", resolution=64, check=True)  # `dsprof predict`
    merged = dsprof.merge("mobilenet_v2", "front.plan.json", resolution=64, out="merged.pt")  # `dsprof merge`
    pages = dsprof.report(["results"], "report", lut=lut)                         # `dsprof report`
    scores = dsprof.importance("mobilenet_v2", proxy="zero-shot", resolution=32)  # `dsprof importance`

The command line (`dsprof.cli`) parses its options and calls these; each lives in `dsprof.workflows` (and
`build_lut` in `dsprof.lut.build`), above the engines it combines.
"""

from .lut.build import build_lut
from .workflows.few import measure_few
from .workflows.importance import importance
from .workflows.measure import export, measure
from .workflows.merge import merge
from .workflows.plan import plan
from .workflows.predict import predict
from .workflows.report import report

__all__ = ["build_lut", "export", "importance", "measure", "measure_few", "merge", "plan", "predict", "report"]
