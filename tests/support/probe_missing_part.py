"""Run by tests/test_requires.py in its own pytest (not collected otherwise: not a test_ file)."""

import pytest

from comfyui_courier.tests.support.requires import missing


def test_needs_a_part():
    missing("a part nobody has")


@pytest.mark.gpu
def test_needs_a_gpu():
    missing("a GPU")


def test_skips_for_another_reason():
    pytest.skip("not this platform")
