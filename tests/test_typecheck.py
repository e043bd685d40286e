"""The type check as part of the test run: mypy with the repository's configuration
(``[tool.mypy]`` in pyproject.toml and the files it lists) reports no error."""

import importlib.util
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_mypy_clean() -> None:
    if importlib.util.find_spec("mypy") is None:
        pytest.fail("mypy is not installed: install the test extra (pip install -e '.[test]')")
    # the cache (.mypy_cache, gitignored) makes later runs incremental
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True,
                          text=True, timeout=900)
    if proc.returncode != 0:
        pytest.fail(f"mypy failed (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}",
                    pytrace=False)
