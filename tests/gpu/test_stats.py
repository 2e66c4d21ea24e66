import numpy as np
import pytest

from comfyui_courier.gpu.stats import percentile, summarize

SAMPLES = [2.41, 2.57, 2.93, 2.49, 3.61, 2.52, 2.44]


@pytest.mark.parametrize("q", [0, 5, 50, 90, 95, 100])
def test_percentile_matches_numpy(q):
    assert percentile(SAMPLES, q) == pytest.approx(np.percentile(SAMPLES, q))


def test_summary_of_repeated_runs():
    s = summarize(SAMPLES)
    assert s.n == 7
    assert s.mean == pytest.approx(np.mean(SAMPLES))
    assert s.median == 2.52
    assert s.p95 == pytest.approx(np.percentile(SAMPLES, 95))
    assert (s.min, s.max) == (2.41, 3.61)
    assert s.stdev == pytest.approx(np.std(SAMPLES, ddof=1))
    assert set(s.as_dict()) == {"n", "mean", "median", "p95", "min", "max", "stdev"}


def test_one_run_has_no_spread():
    s = summarize([1.5])
    assert (s.mean, s.median, s.p95, s.stdev) == (1.5, 1.5, 1.5, 0.0)


@pytest.mark.parametrize("call", [lambda: summarize([]), lambda: percentile([], 50),
                                  lambda: percentile([1.0], 101)])
def test_bad_input_is_refused(call):
    with pytest.raises(ValueError):
        call()
