"""Issue 27 point 5(b): ResNet-18's conv layers offloaded to VTA (cycle model at the PYNQ
design's clock and DRAM bandwidth) vs the same layers on this CPU with tvmpy's llvm int8
kernels; then the whole quantized model (VTA part + CPU part).

    PYTHONPATH=. python bench/vta_resnet18.py --threads 1 [--size 224] [--rounds 5]
        [--residual-dtype int32,int8] [--skip-layers] [--skip-model]

Per layer (TVM's VTA tutorial layers C2..C11, batch 1): an int8 conv + bias + relu + rounding
shift + clip + cast graph; VTA: ``vta.top.graph_pack`` + ``relay.build(target=env.target)``,
the offloaded function run once on the simulator, time = ``cycle_count`` / clock (untuned
default tiles); CPU: the unpacked graph built for llvm, best wall time of ``--rounds``.
Whole model: quantized ResNet-18 (random weights, relay.quantize global scale 8, first conv
and classifier on the CPU), packed and built for VTA; per-node profile on this CPU, VTA nodes
replaced by their cycle-model time; against the unpacked quantized model all on this CPU.
Once per ``--residual-dtype``: "int32" is relay.quantize's default (the residual stream in
int32: the convs ending in a residual add stay on the CPU), "int8" is
``qconfig(residual_dtype="int8")``, VTA's quantization (every conv of the region offloaded).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from common import bench_threads, best_time, machine_description  # noqa: E402


def _layer(w, rng):
    from tvmpy import relay

    x = relay.var("x", shape=(w.batch, w.in_filter, w.height, w.width), dtype="int8")
    wt = relay.const(rng.integers(-8, 8, (w.out_filter, w.in_filter, w.hkernel, w.wkernel))
                     .astype("int8"))
    b = relay.const(rng.integers(-300, 300, (w.out_filter, 1, 1)).astype("int32"))
    y = relay.nn.conv2d(x, wt, strides=(w.hstride, w.wstride), padding=(w.hpad, w.wpad),
                        channels=w.out_filter, kernel_size=(w.hkernel, w.wkernel),
                        out_dtype="int32")
    y = relay.nn.relu(relay.add(y, b))
    y = relay.right_shift(relay.add(y, relay.const(128, "int32")), relay.const(8, "int32"))
    return relay.Function([x], relay.cast(relay.clip(y, -127, 127), "int8"))


def _vta_lib_modules(factory):
    from tvmpy.vta.graph_module import VTALibraryModule

    out, todo = {}, list(factory.imported_modules)
    while todo:
        m = todo.pop()
        if isinstance(m, VTALibraryModule):
            out.update(m.vta_modules)
        todo.extend(m.imported_modules)
    return out


def _cycles(vmod, rng):
    """Cycles of one run of a VTA module (random inputs; the count does not depend on them)."""
    import numpy as np

    from tvmpy import vta

    args = [rng.integers(-64, 64, p["shape"]).astype(p["dtype"]) if p["kind"] == "buffer" else 0
            for p in vmod.params]
    vta.simulator.clear_stats()
    vmod(*args)
    st = vta.simulator.stats()
    return int(st["cycle_count"]), float(st["gemm_utilization"]), np.nan


def _build_vta(func):
    import tvmpy as tvm
    from tvmpy import relay, vta

    env = vta.get_env()
    packed = vta.top.graph_pack(func, env.BATCH, env.BLOCK_OUT, env.WGT_WIDTH)
    with tvm.transform.PassContext(opt_level=3, disabled_pass={"AlterOpLayout"}):
        return relay.build(packed, target=env.target, target_host=env.target_host)


def _build_cpu(func):
    import tvmpy as tvm
    from tvmpy import relay

    with tvm.transform.PassContext(opt_level=3):
        return relay.build(tvm.IRModule.from_expr(func), target="llvm")


def per_layer(rounds, rng):

    import tvmpy as tvm
    from tvmpy import vta
    from tvmpy.contrib import graph_executor
    from tvmpy.vta.top.workloads import RESNET18_CONVS

    env = vta.get_env()
    mhz = env.hw_config.clock_mhz
    rows = []
    for name, w in RESNET18_CONVS.items():
        f = _layer(w, rng)
        lib = _build_vta(f)
        (vmod,) = _vta_lib_modules(lib).values()
        cyc, util, _ = _cycles(vmod, rng)
        cpu = graph_executor.GraphModule(_build_cpu(f)["default"](tvm.cpu(0)))
        cpu.set_input("x", rng.integers(-128, 128, (w.batch, w.in_filter, w.height, w.width))
                      .astype("int8"))
        t_cpu = best_time(cpu.run, repeat=rounds)
        t_vta = cyc / (mhz * 1e6)
        macs = w.macs()
        rows.append(dict(layer=name, macs=macs, cycles=cyc, vta_ms=1e3 * t_vta, util=util,
                         vta_gops=2 * macs / t_vta / 1e9, cpu_ms=1e3 * t_cpu,
                         cpu_gops=2 * macs / t_cpu / 1e9, ratio=t_cpu / t_vta))
        r = rows[-1]
        print(f"{name:>4} {macs / 1e6:8.1f} MMAC  VTA {r['cycles']:>9d} cyc {r['vta_ms']:8.3f} ms "
              f"({r['vta_gops']:5.1f} GOP/s, GEMM util {util:.2f})  CPU {r['cpu_ms']:8.3f} ms "
              f"({r['cpu_gops']:6.1f} GOP/s)  CPU/VTA {r['ratio']:6.2f}", flush=True)
    tot_v = sum(r["vta_ms"] for r in rows)
    tot_c = sum(r["cpu_ms"] for r in rows)
    print(f"sum C2..C11: VTA {tot_v:.2f} ms, CPU {tot_c:.2f} ms, CPU/VTA {tot_c / tot_v:.2f}")
    return rows


def whole_model(size, rounds, rng, residual_dtype="int32"):

    import tvmpy as tvm
    from tvmpy import relay, vta
    from tvmpy.contrib import graph_executor
    from tvmpy.relay import testing

    env = vta.get_env()
    mhz = env.hw_config.clock_mhz
    mod, params = testing.resnet.get_workload(num_layers=18, batch_size=1,
                                              image_shape=(3, size, size))
    with relay.quantize.qconfig(calibrate_mode="global_scale", global_scale=8.0,
                                skip_conv_layers=[0], residual_dtype=residual_dtype):
        qmod = relay.quantize.quantize(mod, params=params)
    x = rng.standard_normal((1, 3, size, size)).astype("float32")
    lib = _build_vta(qmod["main"])
    vmods = _vta_lib_modules(lib)
    cycles = {n: _cycles(m, rng)[0] for n, m in vmods.items()}
    g = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    g.set_input("data", x)
    rep = g.profile(number=max(1, rounds // 2))
    nodes = json.loads(lib.get_graph_json())["nodes"]
    t_vta = t_cpu = 0.0
    n_vta = 0
    for r in rep.rows:
        fn = nodes[r["nid"]].get("attrs", {}).get("func_name", "")
        if fn in cycles:
            t_vta += cycles[fn] / (mhz * 1e6)
            n_vta += 1
        else:
            t_cpu += r["time"]
    ref = graph_executor.GraphModule(_build_cpu(qmod["main"])["default"](tvm.cpu(0)))
    ref.set_input("data", x)
    t_all_cpu = best_time(ref.run, repeat=rounds)
    print(f"whole model {size}x{size}, residual_dtype={residual_dtype}: {n_vta} VTA calls ({len(lib.vta_functions)} distinct), "
          f"{len(lib.vta_cpu_functions)} packed functions on the CPU (int32 results)")
    print(f"  VTA part {1e3 * t_vta:.2f} ms (cycle model) + CPU part {1e3 * t_cpu:.2f} ms "
          f"(measured) = {1e3 * (t_vta + t_cpu):.2f} ms; all on this CPU (llvm int8) "
          f"{1e3 * t_all_cpu:.2f} ms")
    return dict(residual_dtype=residual_dtype, vta_ms=1e3 * t_vta, cpu_part_ms=1e3 * t_cpu, all_cpu_ms=1e3 * t_all_cpu,
                n_vta_calls=n_vta, n_cpu_packed=len(lib.vta_cpu_functions))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--skip-model", action="store_true")
    ap.add_argument("--skip-layers", action="store_true")
    ap.add_argument("--residual-dtype", default="int32,int8",
                    help="comma-separated qconfig residual_dtype values for the whole model")
    args = ap.parse_args()
    threads = bench_threads(args.threads)
    import numpy as np

    from tvmpy import vta

    env = vta.get_env()
    hw = env.hw_config
    print(f"# {machine_description()}; tvmpy llvm int8 threads={threads}; VTA "
          f"{env.BATCH}x{env.BLOCK_IN}x{env.BLOCK_OUT} @ {hw.clock_mhz:g} MHz, DRAM "
          f"{hw.dram_bytes_per_cycle:g} B/cycle ({hw.dram_bytes_per_cycle * hw.clock_mhz:g} MB/s), "
          f"latency {hw.dram_latency} cycles")
    rng = np.random.default_rng(0)
    if not args.skip_layers:
        per_layer(args.rounds, rng)
    if not args.skip_model:
        for rd in args.residual_dtype.split(","):
            whole_model(args.size, args.rounds, rng, rd.strip())


if __name__ == "__main__":
    main()
