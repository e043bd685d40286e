"""``tvmpy rpc ...``: the RPC subcommands: ``server`` (``--tracker HOST:PORT`` joins a fleet),
``tracker`` and ``status`` (the fleet, tracker.py).

``tvmpy rpc server --device qemu-aarch64`` runs the server itself in an AArch64 Python under
qemu-user (server.device_command); ``native`` and ``wasm`` (.wasm modules run by wasmtime) run it
in this process.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from . import ports, server
from .gate import resolve_token

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="rpc_command", required=True, metavar="RPC_COMMAND")
    s = sub.add_parser("server", help="serve this device (or a qemu-user one) to RPC clients")
    server.add_arguments(s)
    s.add_argument("--tracker", type=ports.host_port, default=None, metavar="HOST:PORT",
                   help="join this tracker's fleet as a device of --key (a Dask worker with "
                   "resources {KEY: 1} that owns this device's server)")
    s.add_argument("--name", default=None, help="with --tracker: the name `rpc status` shows")
    s.add_argument("--connect-timeout", type=float, default=10.0, metavar="S",
                   help="with --tracker: seconds to reach and join the tracker before giving "
                   "up with an error (default 10)")
    s.add_argument("--tls-ca-file", default=None, help="with --tracker: Dask TLS CA")
    s.add_argument("--tls-cert", default=None, help="with --tracker: Dask TLS certificate")
    s.add_argument("--tls-key", default=None, help="with --tracker: Dask TLS private key")
    s.set_defaults(rpc_func=run_server)
    # the fleet (tracker.py, on Dask distributed)
    t = sub.add_parser("tracker", help="the tracker of a device fleet (a Dask scheduler)")
    t.set_defaults(rpc_func=_tracker_command("run_from_args"))
    _tracker_module().add_arguments(t)
    st = sub.add_parser("status", help="the fleet: devices per key, free/busy, queued requests")
    _tracker_module().add_status_arguments(st)
    st.set_defaults(rpc_func=_tracker_command("status_from_args"))


def _tracker_module() -> Any:
    import importlib

    return importlib.import_module(".tracker", __package__)


def _tracker_command(name: str) -> Callable[[argparse.Namespace], int]:
    return lambda args: getattr(_tracker_module(), name)(args)


def run_server(args: argparse.Namespace) -> int:
    if args.device == "vta" and not args.key:
        args.key = "vta"  # the key TVM's VTA tutorials and tuning use
    if args.tracker:
        if not args.key:
            print("tvmpy rpc server: error: --tracker needs --key", file=sys.stderr)
            return 2
        from . import fleet

        return fleet.run_from_args(args)
    if args.device != "qemu-aarch64":
        return server.run_from_args(args)
    try:  # the token is checked here; the emulated server generates one if none is given
        token = resolve_token(args.token, args.token_file, args.insecure_no_token)
        server.check_bind(args.host, args.allow_remote, token or not args.insecure_no_token)
        server.policy_from_args(args)
    except (PermissionError, ValueError) as e:
        print(f"tvmpy rpc server: error: {e}", file=sys.stderr)
        return 2
    argv = ["-m", "tvmpy.rpc.server", "--device", args.device, "--host", args.host,
            "--port", str(args.port), "--port-end", str(args.port_end), "--key", args.key,
            "--max-payload", str(args.max_payload), "--max-header", str(args.max_header),
            "--exit-with-parent"]
    for opt in ("max_sessions", "max_pending", "max_queue", "handshake_timeout",
                "queue_timeout", "idle_timeout", "frame_timeout"):
        argv += ["--" + opt.replace("_", "-"), str(getattr(args, opt))]
    argv += ["--allow-remote"] * args.allow_remote + ["--insecure-no-token"] * args.insecure_no_token
    proc = subprocess.Popen(server.device_command(args.device) + argv,
                            env=server.server_env(args.device, token))
    # stopping this command stops the emulated server (and its session) too
    signal.signal(signal.SIGTERM, lambda signum, frame: proc.terminate())
    try:
        return proc.wait()
    except KeyboardInterrupt:
        proc.terminate()
        return proc.wait(10)


def run(args: argparse.Namespace) -> int:
    return int(args.rpc_func(args) or 0)


if __name__ == "__main__":
    _p = argparse.ArgumentParser(prog="tvmpy rpc")
    add_arguments(_p)
    sys.exit(run(_p.parse_args()))
