"""What pieces timed inside the model are priced at, worked out by hand from the rule of dsprof.lut.inmodel's
docstring: one place for the tests that hold a real run's prediction to that rule (tests/test_calibration_few.py,
tests/test_lut_in_situ.py), written apart from the code it checks."""

from __future__ import annotations

import statistics


def posterior_prices(pieces: dict, reference_s: float, session_s: float = 0.0) -> dict:
    """{key: price, seconds} of the timed ``pieces``, {key: (saving alone, saving inside, its standard error, its kind's
    unshrunk line, its kind's shrunk scale)}. Each piece's excess: its residual around its line, squared, less its
    noise (its rounds' and its sessions', ``session_s``); tau0^2 the median excess of the half of the pieces that save
    least alone (at least 3), at least 0; the spread t^2 the mean of (excess - tau0^2) / (line x alone)^2, each clipped
    to [-1, 1], over the pieces whose line price is at least 0.5 % of the model, at least 0. Each piece is priced at
    scale x alone moved toward what it measured by w = tau^2 / (tau^2 + its noise), tau^2 = tau0^2 + t^2 (scale x
    alone)^2."""
    excess = {k: (m - line * a) ** 2 - s * s - session_s ** 2 for k, (a, m, s, line, _) in pieces.items()}
    least = sorted(pieces, key=lambda k: abs(pieces[k][0]))[: max(3, len(pieces) // 2)]
    floor2 = max(0.0, statistics.median(excess[k] for k in least))
    terms = [max(-1.0, min(1.0, (excess[k] - floor2) / (line * a) ** 2)) for k, (a, _, _, line, _) in pieces.items()
             if abs(line * a) >= 0.005 * reference_s]
    spread2 = max(0.0, sum(terms) / len(terms)) if terms else 0.0
    out = {}
    for k, (a, m, s, _, scale) in pieces.items():
        prior = scale * a
        tau2, noise = floor2 + spread2 * prior ** 2, s * s + session_s ** 2
        out[k] = prior + tau2 / (tau2 + noise) * (m - prior) if tau2 + noise > 0 else prior
    return out
