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
    alone = [0.001] * 6
    measured = [0.0006, 0.0010, 0.0008, 0.0008, 0.0008, 0.0008]
    precise = InModel.estimate(_pieces(alone, measured, [0.00001] * 6), R)
    noisy = InModel.estimate(_pieces(alone, measured, [0.00001] * 5 + [0.0]) , R)
    assert precise.price(0, 1, "merged", 0.001)[0] < 0.00065  # a precise measurement: nearly all the way
    loud = InModel.estimate([Timed(0, 1, "merged", 0.001, 0.0006, 0.001)] + _pieces(alone[1:], measured[1:], [0.00001] * 5)[0:], R)
    # the same piece measured with a 1 ms error (ten times its deviation) stays near its prior
    price = loud.price(0, 1, "merged", 0.001)[0]
    assert abs(price - loud.scale * 0.001) < abs(0.0006 - loud.scale * 0.001) / 10
    assert noisy is not None


def test_too_few_pieces_or_no_positive_scale_estimate_nothing():
    alone = [0.001] * (MIN_PIECES - 1)
    assert InModel.estimate(_pieces(alone, alone, [0.0] * len(alone)), R) is None
    five = [0.001] * MIN_PIECES
    assert InModel.estimate(_pieces(five, [-0.001] * MIN_PIECES, [0.0] * MIN_PIECES), R) is None
    assert InModel.estimate(_pieces([-0.001] * MIN_PIECES, five, [0.0] * MIN_PIECES), R) is None
