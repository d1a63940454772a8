"""dsprof's Python API: what each `dsprof` command runs, as documented functions that return objects (docs/api.md).

    import dsprof
    small = dsprof.ModelRef.of("mobilenet_v2", resolution=64)                     # the model, named once
    run = dsprof.measure(small, out="results")                                    # `dsprof measure`
    lut = dsprof.build_lut(["results"], "lut.csv")                                # `dsprof build-lut`
    planned = dsprof.plan(small, lut, keep=7, out="front.json")                   # `dsprof plan`
    found = dsprof.predict(small, lut, "front.plan.json", check=True)             # `dsprof predict`
    merged = dsprof.merge(small, "front.plan.json", out="merged.pt")              # `dsprof merge`
    pages = dsprof.report(["results"], "report", lut=lut)                         # `dsprof report`
    scores = dsprof.importance(small, proxy="zero-shot")                          # `dsprof importance`

The command line (`dsprof.cli`) parses its options and calls these; each lives in `dsprof.workflows` (and
`build_lut` in `dsprof.lut.build`), above the engines it combines.
"""

from ._lazy import lazy_exports
from .lut.build import build_lut
from .workflows.few import measure_few
from .workflows.importance import importance
from .workflows.measure import export, measure
from .workflows.merge import merge
from .workflows.plan import plan
from .workflows.predict import predict

# `report` draws with matplotlib (1.7 s to import): imported where it is first used, not by every other command
__getattr__, __dir__ = lazy_exports(__name__, {"report": "..workflows.report"})

__all__ = ["build_lut", "export", "importance", "measure", "measure_few", "merge", "plan", "predict", "report"]
