"""COURIER_REQUIRE_ALL=1 turns skips for a missing part into failures, except in gpu-marked tests."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent


@pytest.mark.parametrize("require_all,outcome", [("", "3 skipped"), ("1", "1 failed, 2 skipped")])
def test_missing_parts_fail_only_when_every_part_is_required(require_all, outcome):
    env = {**os.environ, "COURIER_REQUIRE_ALL": require_all}
    done = subprocess.run([sys.executable, "-m", "pytest", "-c", str(TESTS / "pytest.ini"), "-q", "-rA",
                           str(TESTS / "support" / "probe_missing_part.py")],
                          cwd=TESTS.parent, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.stdout.rstrip().splitlines()[-1].startswith(outcome), done.stdout + done.stderr
    if require_all:
        assert "FAILED tests/support/probe_missing_part.py::test_needs_a_part" in done.stdout
        assert "missing part: a part nobody has (COURIER_REQUIRE_ALL=1" in done.stdout
