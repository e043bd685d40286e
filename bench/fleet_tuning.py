"""Two tuning jobs on one loopback fleet at the same time, one device killed halfway.

The fleet: a tracker, ``--qemu`` AArch64 devices under qemu-user (key ``a64``) and ``--native``
x86 devices (key ``x86``). Two tuner processes run together: an AArch64 ``conv2d_NCHWc``
task (NEON blocks, ``llvm -mtriple=aarch64-linux-gnu -mattr=+neon``, cross-linked by
LocalBuilder) over ``RPCRunner("a64")`` and the x86 ``gemm.x86`` task over ``RPCRunner("x86")``,
XGB tuner, ``--trials`` each. When the AArch64 log holds half its trials, one qemu device's
worker process is killed (SIGKILL). Reported: the best GFLOP/s after each trial (qemu timings:
emulation, not a board; the curve shows the tuner and the fleet working, not AArch64 speed),
failed trials with their error kinds, and that every trial is in the log exactly once.

    PYTHONPATH=. python bench/fleet_tuning.py [--trials 64] [--qemu 2] [--native 2] [--out f.json]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

A64 = "llvm -mtriple=aarch64-linux-gnu -mattr=+neon"
# (C, H, W, OC, K, stride, pad, ic_bn, oc_bn): a ResNet-18-like 3x3 layer in NEON-width blocks
CONV = (64, 28, 28, 64, 3, 1, 1, 4, 4)
GEMM = (512, 512, 512, "float32")


def _conv_args(c, h, w, oc, k, stride, pad, icb, ocb):  # type: ignore[no-untyped-def]
    from tvmpy import te

    data = te.placeholder((1, c // icb, h, w, icb), name="data")
    kernel = te.placeholder((oc // ocb, c // icb, k, k, icb, ocb), name="kernel")
    return (data, kernel, (stride, stride), (pad, pad, pad, pad), (1, 1), f"NCHW{icb}c",
            f"NCHW{ocb}c", "float32")


def tune_side(side: str, port: int, trials: int, log: str) -> None:
    """One tuner process: the AArch64 conv2d on key a64, or the x86 GEMM on key x86."""
    from tvmpy import autotvm

    if side == "a64":
        task = autotvm.task.create("conv2d_NCHWc.x86", _conv_args(*CONV), target=A64)
        runner = autotvm.RPCRunner("a64", port=port, number=2, repeat=2, timeout=60,
                                   device_wait=60)
    else:
        task = autotvm.task.create("gemm.x86", GEMM, target="llvm")
        runner = autotvm.RPCRunner("x86", port=port, number=4, repeat=3, timeout=30,
                                   device_wait=60)
    option = autotvm.measure_option(builder=autotvm.LocalBuilder(n_parallel=2, timeout=60),
                                    runner=runner)
    tuner = autotvm.tuner.XGBTuner(task, plan_size=16)
    tuner.tune(n_trial=trials, measure_option=option,
               callbacks=[autotvm.callback.log_to_file(log)])
    runner.close()


def _lines(path: str) -> int:
    try:
        with open(path) as f:
            return sum(1 for line in f if line.strip())
    except OSError:
        return 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--qemu", type=int, default=2)
    ap.add_argument("--native", type=int, default=2)
    ap.add_argument("--out", default=None, help="write the curves and counts as JSON")
    ap.add_argument("--side", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--log", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.side:
        tune_side(a.side, a.port, a.trials, a.log)
        return

    from tvmpy.autotvm import record
    from tvmpy.autotvm.tuner.tuner import result_flops
    from tvmpy.rpc.tracker import DeviceWorker, Tracker, connect_tracker

    tmp = tempfile.mkdtemp(prefix="fleet_tuning_")
    logs = {side: os.path.join(tmp, f"{side}.json") for side in ("a64", "x86")}
    t0 = time.time()
    tracker = Tracker(port=0)
    devices = []
    procs: dict[str, subprocess.Popen] = {}
    killed = None
    try:
        for i in range(a.qemu):
            devices.append(DeviceWorker(tracker.address, "a64", "qemu-aarch64", f"qemu-{i}"))
        for i in range(a.native):
            devices.append(DeviceWorker(tracker.address, "x86", "native", f"native-{i}"))
        fleet = connect_tracker("127.0.0.1", tracker.port)
        print(fleet.text_summary(), flush=True)
        t_start = time.time()
        for side in ("a64", "x86"):
            procs[side] = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--side", side, "--port",
                 str(tracker.port), "--trials", str(a.trials), "--log", logs[side]])
        while any(p.poll() is None for p in procs.values()):
            if killed is None and _lines(logs["a64"]) >= a.trials // 2:
                # halfway: kill the first AArch64 device seen measuring (between batches the
                # devices idle while the tuner builds the next one)
                devs = fleet.summary()["keys"]["a64"]["devices"]
                victim = next((d for d in devs if d["status"] == "busy"), None)
                if victim is not None:
                    os.kill(victim["worker_pid"], signal.SIGKILL)
                    killed = (victim["name"], _lines(logs["a64"]),
                              round(time.time() - t_start, 1))
                    print(f"killed {victim['name']} (busy {victim['busy_s']} s) after "
                          f"{killed[1]} AArch64 trials", flush=True)
            time.sleep(0.05)
        wall = time.time() - t_start
        print(fleet.text_summary(), flush=True)
        fleet.close()
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
        for d in devices:
            d.terminate()
        tracker.terminate()
    report: dict = {"trials": a.trials, "wall_s": round(wall, 1), "killed": killed,
                    "setup_s": round(t_start - t0, 1)}
    for side, path in logs.items():
        recs = list(record.load_from_file(path))
        keys = [record.measure_str_key(inp) for inp, _ in recs]
        best, curve = 0.0, []
        for inp, res in recs:
            best = max(best, result_flops(inp.task, res) / 1e9)
            curve.append(round(best, 3))
        errors: dict[int, int] = {}
        for _, res in recs:
            if res.error_no:
                errors[int(res.error_no)] = errors.get(int(res.error_no), 0) + 1
        lost = [res.costs[0] for _, res in recs if res.error_no and "lost" in str(res.costs[0])]
        report[side] = {"records": len(recs), "unique": len(set(keys)), "errors": errors,
                        "lost_device_trials": lost, "best_gflops_curve": curve}
        print(f"{side}: {len(recs)} records, {len(set(keys))} unique configs, errors "
              f"{errors}, best {curve[-1] if curve else 0:.2f} GFLOP/s")
        for n in (1, 8, 16, 24, 32, 48, 64, 96, 128):
            if n <= len(curve):
                print(f"  best after {n:3d} trials: {curve[n - 1]:.3f} GFLOP/s")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
