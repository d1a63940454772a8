"""The planner's held-back rule (issue #27) read from a LUT's raw rows, for brute-force tests of the planner.

A block whose merged entry is not below its linear one and whose linear entry is above its original one neither
merges nor runs faster linearised alone: a context's front does not offer it linear and alone (a span may still
take it). Whether a tiny test model has such a block is decided by timing, so every brute force applies the rule.
"""


def held_back(lut, blocks):
    """The indices of ``blocks`` that ``lut`` (a `dsprof.lut.LUT`) holds back."""
    frame = lut.to_dataframe()

    def median(spec, variant):
        return float(frame[(frame.scope == "block") & (frame.workload == spec) & (frame.variant == variant)]
                     .median_s.iloc[0])

    out = []
    for i, b in enumerate(blocks):
        spec = b.spec.to_str()
        if not median(spec, "merged") < median(spec, "linear") and median(spec, "linear") > median(spec, "original"):
            out.append(i)
    return tuple(out)


def offers(keep, spans, held):
    """Whether a plan (its ``keep`` list and ``spans``, [start, stop)) leaves none of the ``held`` blocks linear and
    alone (outside a span)."""
    inside = {i for a, b in spans or () for i in range(a, b)}
    return not any(not keep[i] and i not in inside for i in held)
