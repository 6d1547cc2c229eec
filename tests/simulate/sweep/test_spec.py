"""What a sweep is (``simulate.sweep.spec``): the candidate widths growing with n."""

import math

from simulate.sweep.spec import candidate_widths


def test_candidate_widths_grow_with_n():
    assert candidate_widths(250) == [2, 4, 8, 16]
    assert candidate_widths(1000) == [2, 4, 8, 16, 32]
    assert candidate_widths(16000) == [2, 4, 8, 16, 32, 64, 128]
    assert candidate_widths(10**6, width_max=64)[-1] == 64
    for n in (100, 777, 5000, 40000):
        top = candidate_widths(n)[-1]
        assert top >= math.sqrt(n) > top / 2
