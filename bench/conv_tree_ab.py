"""bench/conv_shapes.py's cases, two source trees against each other and onnxruntime, sampled
interleaved (issue 12; for changes that cannot be switched off inside one process, e.g. in the
code generator).

One worker process per tree (``PYTHONPATH`` = that tree) builds each case's conv + bias + relu
model (``conv_shapes.build_tvm``) and times ``run()``; the first worker also times onnxruntime
with I/O binding (``conv_shapes.build_ort``). The driver asks the three sides for one sample
each in rotating order, 30 ms pause before each, the same number of calls per sample on every
side, and checks both trees' outputs against onnxruntime. Prints a markdown table: medians (ms),
ratio = ORT time / tvmpy time (median of per-round ratios, [p10, p90]) for each tree, and the
median of the per-round new/old tvmpy time ratios.

    python bench/conv_tree_ab.py OLD_TREE NEW_TREE [samples=11] [filter text]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def worker() -> None:
    """Serve ``build``/``time``/``check`` requests on stdin (one JSON line each)."""
    sys.path.insert(0, HERE)
    import conv_shapes as cs  # noqa: PLC0415
    from common import ensure_native_blas  # noqa: PLC0415

    ensure_native_blas()
    mods: dict = {}
    for line in sys.stdin:
        req = json.loads(line)
        c = tuple(req.get("case", ()))
        if req["op"] == "build":
            x, w, b = cs._weights(c, seed=sum(c))
            m = cs.build_tvm(c, x, w, b)
            m.run()
            ort = None
            if req.get("ort"):
                sess, io, out = cs.build_ort(c, x, w, b)
                sess.run_with_iobinding(io)
                ort = (sess, io, out)
            mods = {"tvm": m, "ort": ort}
            reply = {"out": m.get_output(0).numpy().ravel().tolist(),
                     "ref": None if ort is None else ort[2].numpy().ravel().tolist(),
                     "dt": cs._calls(m.run, 0.01)}
        else:  # time
            fn = mods["tvm"].run if req["side"] == "tvm" else (
                lambda s=mods["ort"][0], b=mods["ort"][1]: s.run_with_iobinding(b))
            reply = {"t": cs._sample(fn, int(req["n"]))}
        print(json.dumps(reply), flush=True)


class Side:
    def __init__(self, tree: str) -> None:
        env = {**os.environ, "PYTHONPATH": tree}
        self.p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker"],
                                  cwd=tree, env=env, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    def ask(self, **req) -> dict:
        self.p.stdin.write(json.dumps(req) + "\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError("worker died")
        return json.loads(line)


def main() -> None:
    old_tree, new_tree = sys.argv[1], sys.argv[2]
    samples = int(sys.argv[3]) if len(sys.argv) > 3 else 11
    filt = sys.argv[4] if len(sys.argv) > 4 else ""
    sys.path.insert(0, HERE)
    import conv_shapes as cs  # noqa: PLC0415

    old, new = Side(old_tree), Side(new_tree)
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S')} UTC load {os.getloadavg()[0]:.2f}; old "
          f"{old_tree}, new {new_tree}; {samples} rounds")
    print("| case | old ms | new ms | ORT ms | old ratio [p10, p90] | new ratio [p10, p90] | "
          "new/old time [p10, p90] |")
    print("|---|---|---|---|---|---|---|")
    res = []
    for c in cs.CASES:
        if filt not in cs.case_name(c):
            continue
        ro = old.ask(op="build", case=list(c))
        rn = new.ask(op="build", case=list(c), ort=True)
        ref = np.array(rn["ref"])
        for r in (ro, rn):
            np.testing.assert_allclose(np.array(r["out"]), ref, rtol=1e-3, atol=1e-3)
        # calls per sample: the fastest side's count for 10 ms (same on every side)
        n = max(ro["dt"], rn["dt"])
        sides = {"old": (old, "tvm"), "new": (new, "tvm"), "ort": (new, "ort")}
        t: dict[str, list[float]] = {k: [] for k in sides}
        order = list(sides)
        for i in range(samples):
            for k in order[i % 3:] + order[:i % 3]:
                time.sleep(0.03)
                w, side = sides[k]
                t[k].append(w.ask(op="time", side=side, n=n)["t"])
        a = {k: np.array(v) for k, v in t.items()}
        q = {k: a["ort"] / a[k] for k in ("old", "new")}
        tr = a["new"] / a["old"]

        def pct(v: np.ndarray) -> str:
            return f"{np.median(v):.2f} [{np.percentile(v, 10):.2f}, {np.percentile(v, 90):.2f}]"

        res.append((np.median(q["old"]), np.median(q["new"]), np.median(tr)))
        flags = [" **<0.9**" if np.median(q[k]) < 0.9 else "" for k in ("old", "new")]
        print(f"| {cs.case_name(c)} | {np.median(a['old']) * 1e3:.4f} | "
              f"{np.median(a['new']) * 1e3:.4f} | {np.median(a['ort']) * 1e3:.4f} | "
              f"{pct(q['old'])}{flags[0]} | {pct(q['new'])}{flags[1]} | {pct(tr)} |", flush=True)
    v = np.array(res)
    for j, name in ((0, "old"), (1, "new")):
        print(f"# {name}: {len(v)} cases, median ratio {np.median(v[:, j]):.2f}, min "
              f"{v[:, j].min():.2f}, below 0.9: {(v[:, j] < 0.9).sum()}")
    print(f"# new/old tvmpy time: median {np.median(v[:, 2]):.2f}, min {v[:, 2].min():.2f}, "
          f"max {v[:, 2].max():.2f}; load {os.getloadavg()[0]:.2f} at {time.strftime('%H:%M:%S')}")
    for s in (old, new):
        s.p.stdin.close()
        s.p.wait()


if __name__ == "__main__":
    if "--worker" in sys.argv:
        worker()
    else:
        main()
