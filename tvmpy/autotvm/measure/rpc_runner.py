"""``RPCRunner``: time built candidates on devices of the fleet (TVM's ``autotvm.RPCRunner``).

Each candidate the builder exported becomes one Dask task with resources ``{key: 1}``
(``tvmpy.rpc.fleet.measure_task``): a device of ``key`` uploads the library to its RPC server
and times it there (``runtime.measure``: random inputs on the device, ``time_evaluator`` on the
device, so the network is not counted). Tasks of one batch queue on the tracker with
``priority`` and run on as many devices of the key as there are.

Outcomes: ``NO_ERROR`` with one cost per repeat; the run fails or the library does not load ->
``RUNTIME_DEVICE``; longer than ``timeout`` -> ``RUN_TIMEOUT``; the device dies or disconnects
mid-measurement -> ``RUNTIME_DEVICE`` naming the lost device (that trial is not measured again,
so the log holds it once; with ``retry_lost=True`` it is measured on another device of the key
instead and the loss is only noted in ``runner.lost_devices``); its queued candidates move to
the other devices of the key. When no
device of the key is left for ``device_wait`` seconds, the batch's remaining candidates fail
with ``RUNTIME_DEVICE`` and ``runner.no_device`` says so; the next batch (or task) then raises
:class:`NoDeviceLeft` (a LookupError) unless a device of the key is back: tuning stops
instead of logging every remaining trial as failed (``tvmpy tune`` reports the failures and
exits 1). Otherwise tuning goes on: a failed trial is a result.

The library must be built for the devices' target: ``LocalBuilder`` exports with the toolchain
of the task's target (a cross linker for ``-mtriple=aarch64-linux-gnu``).
"""

from __future__ import annotations

import os
import queue
import time
import uuid
from collections.abc import Sequence
from typing import Any

from .measure import Builder, BuildResult, MeasureErrorNo, MeasureInput, MeasureResult, Runner

__all__ = ["RPCRunner", "NoDeviceLeft"]


class NoDeviceLeft(LookupError):
    """No device of the runner's key is left in the fleet: tuning cannot go on."""


class RPCRunner(Runner):
    """Measure on the devices of ``key`` registered with the tracker at ``host:port``.

    ``number``/``repeat``/``min_repeat_ms``: as ``time_evaluator`` (on the device);
    ``timeout``: seconds per candidate on the device; ``priority``: of this runner's requests
    (larger first); ``n_parallel``: the batch size a tuner should use (default: the number of
    devices of the key when first connected, at least 1); ``enable_cpu_cache_flush``: flush the
    caches before each repeat; ``device_wait``: seconds to wait for a device of the key when
    none is left; ``retry_lost``: measure a trial again on another device when its device is
    lost mid-measurement (default: a failed trial); ``security``: Dask TLS settings for a
    remote tracker; ``cooldown_interval``
    is accepted for TVM compatibility (devices rest between tasks anyway)."""

    def __init__(self, key: str, host: str = "127.0.0.1", port: int = 9190, priority: int = 1,
                 timeout: float = 10, n_parallel: int | None = None, number: int = 4,
                 repeat: int = 3, min_repeat_ms: float = 0, cooldown_interval: float = 0.0,
                 enable_cpu_cache_flush: bool = False, check_correctness: bool = False,
                 device_wait: float = 30.0, security: Any = None, seed: int = 0,
                 retry_lost: bool = False):
        if not isinstance(key, str) or not key:
            raise ValueError(f"RPCRunner: key must be a non-empty device key, got {key!r}")
        for name, v in (("number", number), ("repeat", repeat)):
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"RPCRunner: {name} must be a positive int, got {v!r}")
        if not timeout or timeout <= 0:
            raise ValueError(f"RPCRunner: timeout must be > 0 seconds, got {timeout!r}")
        if min_repeat_ms < 0:
            raise ValueError("RPCRunner: min_repeat_ms must be >= 0")
        if check_correctness:
            raise ValueError("RPCRunner: check_correctness is not supported on the fleet; "
                             "check a candidate with LocalRunner or an RPC session")
        self.key, self.host, self.port = key, host, int(port)
        self.priority = int(priority)
        self.timeout = float(timeout)
        self.number, self.repeat, self.min_repeat_ms = number, repeat, float(min_repeat_ms)
        self.cooldown_interval = float(cooldown_interval)
        self.enable_cpu_cache_flush = bool(enable_cpu_cache_flush)
        self.device_wait = float(device_wait)
        self.security = security
        self.seed = int(seed)
        self.retry_lost = bool(retry_lost)
        self.lost_devices: list[str] = []  # "device D lost while measuring config N", in order
        self.no_device: str | None = None  # why candidates failed for want of a device
        self._n_parallel = n_parallel
        self._tracker: Any = None

    # -- the tracker --
    @property
    def tracker(self) -> Any:
        if self._tracker is None:
            from ...rpc.tracker import connect_tracker

            try:
                self._tracker = connect_tracker(self.host, self.port, self.security)
            except OSError as e:
                raise ConnectionError(f"RPCRunner: cannot reach the tracker at "
                                      f"{self.host}:{self.port}: {e}") from None
        return self._tracker

    def _devices(self) -> int:
        entry = self.tracker.summary()["keys"].get(self.key)
        return len(entry["devices"]) if entry else 0

    @property
    def n_parallel(self) -> int:  # type: ignore[override]
        if self._n_parallel is None:
            self._n_parallel = max(1, self._devices())
        return self._n_parallel

    def set_task(self, task: Any, builder: Builder | None = None) -> None:
        if self._devices() == 0:
            if self.no_device is not None:
                raise NoDeviceLeft(f"RPCRunner: {self.no_device}: tuning stopped")
            raise LookupError(f"RPCRunner: no device with key {self.key!r} in the fleet at "
                              f"{self.host}:{self.port} (keys: {self.tracker.keys() or 'none'})")

    def get_build_kwargs(self) -> dict:
        return {}

    def close(self) -> None:
        if self._tracker is not None:
            self._tracker.close()
            self._tracker = None

    # -- running --
    def run(self, measure_inputs: Sequence[MeasureInput],
            build_results: Sequence[BuildResult]) -> list[MeasureResult]:
        from ...rpc.fleet import measure_task

        if len(measure_inputs) != len(build_results):
            raise ValueError(f"RPCRunner.run: {len(measure_inputs)} inputs but "
                             f"{len(build_results)} build results")
        client = self.tracker.client
        if self.no_device is not None:
            if self._devices() == 0:  # none came back since the last batch: stop tuning
                for b in build_results:
                    _remove(b.filename)
                raise NoDeviceLeft(f"RPCRunner: {self.no_device}: tuning stopped")
            self.no_device = None
        results: list[MeasureResult | None] = [None] * len(build_results)
        futures: dict[Any, int] = {}
        for i, bres in enumerate(build_results):
            if bres.error_no != 0:
                results[i] = _build_failure(bres)
                continue
            try:
                with open(bres.filename, "rb") as f:
                    lib = f.read()
            except OSError as e:
                results[i] = MeasureResult((f"cannot read the built library: {e}",),
                                           int(MeasureErrorNo.RUNTIME_DEVICE), bres.time_cost,
                                           time.time())
                continue
            finally:
                _remove(bres.filename)
            suffix = os.path.splitext(bres.filename)[1] or ".so"
            fut = client.submit(
                measure_task, lib, f"cand{i}{suffix}", "default_function",
                [(tuple(s), str(d)) for s, d in bres.arg_info], self.number, self.repeat,
                self.min_repeat_ms, self.timeout,
                "cache_flush_cpu_non_first_arg" if self.enable_cpu_cache_flush else "",
                self.seed, self.retry_lost, resources={self.key: 1}, priority=self.priority,
                pure=False,
                key=f"tvmpy-measure-{self.key}-{uuid.uuid4().hex[:16]}")
            futures[fut] = i
        try:
            self._collect(futures, measure_inputs, build_results, results)
        finally:
            for fut in futures:
                if not fut.done():
                    fut.cancel()
        return results  # type: ignore[return-value]

    def _collect(self, futures: dict[Any, int], measure_inputs: Sequence[MeasureInput],
                 build_results: Sequence[BuildResult],
                 results: list[MeasureResult | None]) -> None:
        finished: queue.Queue = queue.Queue()
        for fut in futures:
            fut.add_done_callback(finished.put)
        pending = set(futures)
        no_device_since: float | None = None
        while pending:
            try:
                fut = finished.get(timeout=1.0)
            except queue.Empty:
                fut = None
            if fut is not None:
                if fut in pending:
                    pending.discard(fut)
                    i = futures[fut]
                    results[i] = self._result(fut, build_results[i], measure_inputs[i])
                no_device_since = None
                continue
            if self._devices() > 0:
                no_device_since = None
            elif no_device_since is None:
                no_device_since = time.monotonic()
            elif time.monotonic() - no_device_since > self.device_wait:
                msg = self.no_device = (f"no device with key {self.key!r} left in the fleet "
                                        f"at {self.host}:{self.port} for "
                                        f"{self.device_wait:g} s")
                for fut in pending:
                    fut.cancel()
                    i = futures[fut]
                    results[i] = MeasureResult((msg,), int(MeasureErrorNo.RUNTIME_DEVICE),
                                               build_results[i].time_cost, time.time())
                return

    def _result(self, fut: Any, bres: BuildResult, inp: MeasureInput) -> MeasureResult:
        try:
            # bounded: a result still on a device that dies before it is fetched is "lost", and
            # Dask would wait for a device of the key to compute it again, maybe forever
            out = fut.result(timeout=max(10.0, self.device_wait))
        except TimeoutError:
            return MeasureResult(("the measurement's result was lost with its device before it "
                                  "could be fetched",), int(MeasureErrorNo.RUNTIME_DEVICE),
                                 bres.time_cost, time.time())
        except Exception as e:  # noqa: BLE001 - e.g. KilledWorker: devices kept dying
            return MeasureResult((f"{type(e).__name__}: {e}",), int(MeasureErrorNo.RUNTIME_DEVICE),
                                 bres.time_cost, time.time())
        if out[-1] is not None:
            self.lost_devices.append(f"device {out[-1]} lost while measuring config "
                                     f"{getattr(inp.config, 'index', '?')}")
        if out[0] == "ok":
            return MeasureResult(tuple(out[1]), 0, bres.time_cost + out[3], time.time())
        kind = getattr(MeasureErrorNo, out[1], MeasureErrorNo.UNKNOWN_ERROR)
        return MeasureResult((out[2],), int(kind), bres.time_cost + out[4], time.time())


def _build_failure(bres: BuildResult) -> MeasureResult:
    return MeasureResult((bres.error or "build failed",), int(bres.error_no), bres.time_cost,
                         time.time())


def _remove(path: str | None) -> None:
    if path:
        try:
            os.remove(path)
        except OSError:
            pass
