"""Measurement workers are fresh interpreters: a tuning script written at module top level (no
``if __name__ == "__main__":``, as TVM's tutorials are), with its template defined in the script
itself, tunes with LocalBuilder + LocalRunner when run as ``python script.py``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent('''
    import sys
    import numpy as np
    from tvmpy import autotvm, te

    SCALE = 2.0  # a global of __main__ the template reads: it must travel with it

    @autotvm.template("toplevel/matmul")
    def matmul(n, l, m):
        A = te.placeholder((n, l), name="A")
        B = te.placeholder((l, m), name="B")
        k = te.reduce_axis((0, l), name="k")
        C = te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[k, j] * SCALE, axis=k), name="C")
        s = te.create_schedule(C.op)
        cfg = autotvm.get_config()
        y, x = s[C].op.axis
        cfg.define_split("tile_x", x, num_outputs=2)
        xo, xi = cfg["tile_x"].apply(s, C, x)
        s[C].reorder(y, xo, s[C].op.reduce_axis[0], xi)
        return s, [A, B, C]

    print("script top level ran", flush=True)  # printed once: workers do not re-run it
    task = autotvm.task.create("toplevel/matmul", (17, 9, 24), target="llvm")
    option = autotvm.measure_option(builder=autotvm.LocalBuilder(n_parallel=1, timeout=60),
                                    runner=autotvm.LocalRunner(number=2, repeat=1, timeout=60))
    tuner = autotvm.tuner.GridSearchTuner(task)
    tuner.tune(n_trial=4, measure_option=option,
               callbacks=[autotvm.callback.log_to_file(sys.argv[1])])
''')


def test_toplevel_script_tunes_in_fresh_workers(tmp_path):
    script = tmp_path / "tune_script.py"
    script.write_text(SCRIPT)
    log = tmp_path / "tune.json"
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join([root] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH")
                                                  else []))
    proc = subprocess.run([sys.executable, str(script), str(log)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("script top level ran") == 1, proc.stdout
    records = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    assert len(records) == 4
    for r in records:
        text = json.dumps(r)
        assert "toplevel/matmul" in text
    from tvmpy.autotvm.record import decode

    results = [decode(line)[1] for line in log.read_text().splitlines() if line.strip()]
    assert all(res.error_no == 0 for res in results), results
    assert all(min(res.costs) > 0 for res in results)
