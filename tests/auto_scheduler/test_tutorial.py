"""TVM's auto-scheduler matmul tutorial runs as a script, as written (module top level)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_tutorial_script_runs(tmp_path):
    here = Path(__file__).parent
    root = here.parent.parent
    env = {**os.environ, "TRIALS": "6", "PYTHONPATH": str(root)}
    p = subprocess.run([sys.executable, str(here / "tutorial_tune_matmul.py"),
                        str(tmp_path / "matmul.json")], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "TUTORIAL OK" in p.stdout
    assert len((tmp_path / "matmul.json").read_text().splitlines()) == 6
