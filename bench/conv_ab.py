"""bench/conv_shapes.py's cases as a before/after comparison in one process (issue 12, branch
i12-conv): tvmpy "old" (the 1x1-as-matmul form only up to 1024 pixels, NCHW inputs transformed
to NCHW{c}c before a direct convolution, NCHW{c}c -> NCHW with a gather per vector: the
behaviour before 2026-11-26's i12-conv work) vs
"new" (today's defaults) vs onnxruntime with I/O binding; the three sides sampled interleaved in
rotating order (30 ms pause before each sample), outputs checked against onnxruntime. Prints a
markdown table: medians (ms), ratio = ORT time / tvmpy time (median of per-sample ratios), and
the median of the per-sample new/old tvmpy time ratios (robust on a loaded machine).

    python bench/conv_ab.py [samples=11] [filter text]
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import conv_shapes as cs  # noqa: E402
import numpy as np  # noqa: E402
from common import ensure_native_blas  # noqa: E402

ensure_native_blas()
import tvmpy as tvm  # noqa: E402
from tvmpy import relay  # noqa: E402
from tvmpy.contrib import graph_executor  # noqa: E402
from tvmpy.relay.op.strategy import x86_alter_op as xa  # noqa: E402
from tvmpy.topi.x86 import injective  # noqa: E402

_UNBLOCK = injective._schedule_unblock


def build(c, x, w, b, old):
    ic, oc, hw, k, s = c
    p = k // 2
    xv = relay.var("x", shape=x.shape, dtype="float32")
    y = relay.nn.conv2d(xv, relay.const(w), strides=(s, s), padding=(p,) * 4, channels=oc, kernel_size=(k, k))
    y = relay.nn.relu(relay.nn.bias_add(y, relay.const(b)))
    mod = tvm.IRModule.from_expr(relay.Function([xv], y))
    xa.POINTWISE_MAX_PIXELS = 1024 if old else None
    injective._schedule_unblock = (lambda sch, out: False) if old else _UNBLOCK
    with tvm.transform.PassContext(opt_level=3, config={"relay.x86.conv_nchw_input": not old}):
        lib = relay.build(mod, target="llvm")
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m.set_input("x", x)
    return m

samples = int(sys.argv[1]) if len(sys.argv) > 1 else 11
filt = sys.argv[2] if len(sys.argv) > 2 else ""
print(f"# {time.strftime('%H:%M:%S')} load {os.getloadavg()[0]:.2f}")
print("| case | old tvmpy ms | new tvmpy ms | ORT ms | old ratio | new ratio [p10, p90] | new/old time |")
print("|---|---|---|---|---|---|---|")
res = []
for c in cs.CASES:
    if filt not in cs.case_name(c):
        continue
    x, w, b = cs._weights(c, seed=sum(c))
    mo, mn = build(c, x, w, b, True), build(c, x, w, b, False)
    sess, io, out = cs.build_ort(c, x, w, b)
    sess.run_with_iobinding(io)
    mo.run()
    mn.run()
    ref = out.numpy()
    for m in (mo, mn):
        np.testing.assert_allclose(m.get_output(0).numpy(), ref, rtol=1e-3, atol=1e-3)
    fs = {"old": mo.run, "new": mn.run, "ort": lambda s=sess, b=io: s.run_with_iobinding(b)}
    n = max(cs._calls(f, 0.01) for f in fs.values())
    t = {k: [] for k in fs}
    order = list(fs)
    for i in range(samples):
        for k in order[i % 3:] + order[:i % 3]:
            time.sleep(0.03)
            t[k].append(cs._sample(fs[k], n))
    a = {k: np.array(v) for k, v in t.items()}
    ro, rn = a["ort"] / a["old"], a["ort"] / a["new"]
    r = dict(name=cs.case_name(c), old=np.median(a["old"]), new=np.median(a["new"]), ort=np.median(a["ort"]),
             ro=np.median(ro), rn=np.median(rn), lo=np.percentile(rn, 10), hi=np.percentile(rn, 90),
             tr=np.median(a["new"] / a["old"]))
    res.append(r)
    f1 = " **<0.9**" if r["ro"] < 0.9 else ""
    f2 = " **<0.9**" if r["rn"] < 0.9 else ""
    print(f"| {r['name']} | {r['old']*1e3:.4f} | {r['new']*1e3:.4f} | {r['ort']*1e3:.4f} | {r['ro']:.2f}{f1} | {r['rn']:.2f} [{r['lo']:.2f}, {r['hi']:.2f}]{f2} | {r['tr']:.2f} |", flush=True)
for key in ("ro", "rn"):
    v = np.array([r[key] for r in res])
    print(f"# {'old' if key == 'ro' else 'new'}: {len(v)} cases, median ratio {np.median(v):.2f} (p10-p90 {np.percentile(v,10):.2f}-{np.percentile(v,90):.2f}), min {v.min():.2f}, below 0.9: {(v<0.9).sum()}")
tr = np.array([r["tr"] for r in res])
print(f"# new/old tvmpy time: median {np.median(tr):.2f}, min {tr.min():.2f}, max {tr.max():.2f}; load {os.getloadavg()[0]:.2f} at {time.strftime('%H:%M:%S')}")
