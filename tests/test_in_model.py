"""In-model prices (issue #36): the scale, spread and shrinkage of `dsprof.lut.inmodel`, worked out by hand.

Pure arithmetic on hand-written pieces (no timing): what each number must be follows from the module docstring.
"""

import math

import pytest

from dsprof.lut.inmodel import MIN_PIECES, InModel, Timed

R = 0.010  # the whole model: 10 ms


def _pieces(alone, measured, se):
    return [Timed(i, i + 1, "merged", a, m, s) for i, (a, m, s) in enumerate(zip(alone, measured, se))]


def test_pieces_that_save_what_they_saved_alone_keep_their_price():
    alone = [0.001, 0.0005, 0.0008, 0.0012, 0.0003]
    im = InModel.estimate(_pieces(alone, alone, [0.0] * 5), R)
    assert im.scale == pytest.approx(1.0, abs=1e-15) and im.spread == 0.0 and im.scale_se == pytest.approx(0.0, abs=1e-12)
    assert im.price(0, 1, "merged", 0.001) == pytest.approx((0.001, 0.0, True))
    saving, se, timed = im.price(7, 8, "merged", 0.002)  # a piece not timed: the scale times its saving alone
    assert (saving, se, timed) == (pytest.approx(0.002), 0.0, False)


def test_scale_spread_and_shrinkage_by_hand():
    # five pieces save 1 ms alone each; inside the model 0.6, 1.0, 0.8, 0.8 and 0.8 ms: scale 4/5 = 0.8
    alone = [0.001] * 5
    measured = [0.0006, 0.0010, 0.0008, 0.0008, 0.0008]
    se = [0.0001] * 5
    im = InModel.estimate(_pieces(alone, measured, se), R)
    assert im.scale == pytest.approx(0.8)
    # residuals -0.2, 0.2, 0, 0, 0 ms; each term ((r^2 - se^2) / (0.8 ms)^2): 0.03/0.64 twice, -0.01/0.64 three times
    terms = [(0.04 - 0.01) / 0.64] * 2 + [-0.01 / 0.64] * 3
    assert im.spread == pytest.approx(math.sqrt(sum(terms) / 5))
    assert im.scale_se == pytest.approx(math.sqrt(2 * 0.0002 ** 2) / 0.005 / 0.8)
    # piece 0: prior 0.8 ms, tau = spread * 0.8 ms, sigma 0.1 ms
    tau = im.spread * 0.0008
    w = tau ** 2 / (tau ** 2 + 0.0001 ** 2)
    saving, error, timed = im.price(0, 1, "merged", 0.001)
    assert timed and saving == pytest.approx(0.0008 + w * (0.0006 - 0.0008)) and error == pytest.approx(math.sqrt(w) * 1e-4)
    assert 0.0006 < saving < 0.0008  # between its measurement and its prior
    # an untimed piece is known to tau: the spread of one piece around the scale
    assert im.price(9, 10, "merged", 0.001) == (pytest.approx(0.0008), pytest.approx(tau), False)
    # a variant not timed is a piece not timed
    assert im.price(0, 1, "linear", 0.001)[2] is False


def test_a_noisy_measurement_moves_the_price_less():
    # six pieces saving 1 ms alone; inside the model 0.6, 1.0 and four times 0.8 ms (scale 0.8, a spread)
    alone = [0.001] * 6
    measured = [0.0006, 0.0010, 0.0008, 0.0008, 0.0008, 0.0008]
    precise = InModel.estimate(_pieces(alone, measured, [0.00001] * 6), R)
    loud = InModel.estimate([Timed(0, 1, "merged", 0.001, 0.0006, 0.001)] + _pieces(alone, measured, [0.00001] * 6)[1:], R)
    prior = 0.8 * 0.001
    # measured to 0.01 ms, piece 0 is priced nearly at its measurement (0.6 ms)
    assert abs(precise.price(0, 1, "merged", 0.001)[0] - 0.0006) < 0.1 * abs(0.0006 - prior)
    # measured to 1 ms (five times its deviation from the prior), it stays near its prior
    assert abs(loud.price(0, 1, "merged", 0.001)[0] - loud.scale * 0.001) < 0.1 * abs(0.0006 - loud.scale * 0.001)


def test_too_few_pieces_or_no_positive_scale_estimate_nothing():
    alone = [0.001] * (MIN_PIECES - 1)
    assert InModel.estimate(_pieces(alone, alone, [0.0] * len(alone)), R) is None
    five = [0.001] * MIN_PIECES
    assert InModel.estimate(_pieces(five, [-0.001] * MIN_PIECES, [0.0] * MIN_PIECES), R) is None
    assert InModel.estimate(_pieces([-0.001] * MIN_PIECES, five, [0.0] * MIN_PIECES), R) is None
    # pieces that cost time alone and inside the model (ResNet's linear blocks): a positive scale, 2 here
    costly = InModel.estimate(_pieces([-0.001] * MIN_PIECES, [-0.002] * MIN_PIECES, [0.0] * MIN_PIECES), R)
    assert costly.scale == pytest.approx(2.0) and costly.price(0, 1, "merged", -0.001)[0] == pytest.approx(-0.002)


def test_the_calibration_group_says_how_the_pieces_combine_by_hand():
    """A hand LUT (tests/test_lut_context.py): 7 blocks, each saving 0.75 ms inside the 20 ms model (scale 1.5), and a
    calibration group whose every-block-merged model ran at ``ratio`` of the original: it saved 1 - ratio where the
    pieces' sum predicts 7 x 0.75 / 20 = 26.25 %. Every saving then counts rho = (1 - ratio) / 0.2625, and the
    systematic term is the spread of a uniform on [1, rho] around rho (plus rho's error, 0 here)."""
    import pandas as pd

    from dsprof.lut import LUT, model_label, predict_latency
    from dsprof.merge import Plan
    from dsprof.models import find_blocks, get_model
    from dsprof.profiler.records import CALIBRATION
    from test_lut_context import KEEP, OPTIONS, _hand_context_lut

    blocks = find_blocks(get_model("mobilenet_v2", resolution=32, **OPTIONS))
    label = model_label("mobilenet_v2", {**OPTIONS, "resolution": 32})
    frame = _hand_context_lut(label, blocks).to_dataframe()
    ratio = 1 - 0.8 * 0.2625  # the calibration plan saved 0.8 of what its pieces add up to
    row = frame[frame.scope == "model"].iloc[0].to_dict()
    row.update(variant=CALIBRATION, median_s=0.020 * ratio, ratio=ratio, ratio_se=0.0)
    lut = LUT(pd.concat([frame, pd.DataFrame([row])], ignore_index=True))
    plan = Plan("mobilenet_v2", KEEP, OPTIONS, merge=tuple(not k for k in KEEP))
    pred = predict_latency("mobilenet_v2", lut, plan, options=OPTIONS, resolution=32, strict=True)
    rho = 0.8
    assert pred.total_s == pytest.approx(0.020 - rho * 3 * 0.00075, rel=1e-9)  # three merged blocks, x rho
    assert "together they save x0.800 of their sum" in pred.systematic_source
    u = 1 - 1 / pred.speedup
    spread = math.sqrt((1 - rho) ** 2 / 12 + (rho - (1 + rho) / 2) ** 2) / rho
    assert pred.systematic == pytest.approx(1.959964 * pred.speedup * u * spread, rel=1e-9)
