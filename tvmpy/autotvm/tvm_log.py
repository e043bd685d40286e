"""Reading tuning logs written by Apache TVM (v0.1 and v0.2 lines, TVM 0.6-0.8) into this
repository's records (see :mod:`.record`).

A TVM line names a template, its arguments and a config whose knobs are ``[name, kind,
value]`` with the kinds ``sp`` (split), ``re`` (reorder), ``an`` (annotate) and ``ot`` (other
option), the kinds of this repository's spaces. Mapping a line:

* the target string keeps the options this repository's targets know (TVM's ``-link-params``,
  ``-libs``... are dropped);
* TVM task names that differ here are renamed (:data:`TASK_NAMES`) and their arguments adapted
  (TVM's dense templates take a ``bias`` argument, None in a log; the ones here do not);
* x86 convolutions (``conv2d_NCHWc.x86``, ``depthwise_conv2d_NCHWc.x86``): TVM's workload is
  in NCHW/OIHW and its knobs ``tile_ic``/``tile_oc`` are the channel blocks; here the blocks
  are in the workload's shapes (blocked data, packed kernel), so the line becomes that
  workload, TVM's ``tile_ow`` split ``[-1, r]`` the register tile ``r`` and ``unroll_kw`` /
  ``tile_oh`` the same knobs; the knobs TVM does not have take their default;
* otherwise, when the template is registered here, every knob of the line must be a knob of
  its space with a value the space holds; the config index is recomputed in this space (the
  tuners mark visited points by index). A template not registered in this process keeps the line's config
  as it is (as for this repository's own logs).

A line that fails a check raises :class:`UnmappableRecord`; ``record.load_from_lines`` skips
it with a warning naming the line number.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from .space import ConfigEntity, ConfigSpace

__all__ = ["UnmappableRecord", "decode_tvm", "TASK_NAMES", "fit_config", "tvm_target"]


class UnmappableRecord(ValueError):
    """A well-formed TVM record that cannot be mapped onto this repository's templates."""


TASK_NAMES = {
    "dense_nopack.x86": "dense.x86",
}
"""TVM task name -> the name of the same template here (names not listed are the same)."""

_CONV = {"conv2d_NCHWc.x86", "depthwise_conv2d_NCHWc.x86"}
_DENSE = {"dense.x86", "dense_pack.x86", "dense.cuda"}
_TARGET_OPTIONS = ("-mcpu", "-mattr", "-mtriple", "-model", "-device", "-num-cores")


def tvm_target(text: str) -> str:
    """A TVM target string without the options this repository's targets derive or do not know
    (``-keys``: from the kind; ``-link-params``, ``-libs``...), so that ``llvm -keys=cpu
    -link-params=0`` is ``llvm``."""
    parts = str(text).split()
    if not parts:
        return "llvm"
    keep = [parts[0]] + [p for p in parts[1:] if p.split("=")[0] in _TARGET_OPTIONS]
    return " ".join(keep)


def _is_tensor(a: Any) -> bool:
    return isinstance(a, list) and len(a) == 3 and a[0] == "TENSOR"


def _adapt_args(name: str, args: list[Any]) -> list[Any]:
    if name in _DENSE and len(args) == 4:  # TVM: (data, weight, bias, out_dtype)
        if args[2] is not None:
            raise UnmappableRecord(f"{name} with a bias tensor: the dense templates here take "
                                   "(data, weight, out_dtype)")
        return [args[0], args[1], args[3]]
    return args


def _conv_args(name: str, args: list[Any], cfg: ConfigEntity) -> tuple[list[Any], dict[str, Any]]:
    """TVM's x86 convolution workload (NCHW data, OIHW kernel; the blocks are the knobs
    ``tile_ic``/``tile_oc``) as this repository's (the blocks in the shapes: blocked data,
    packed kernel), and the knob values it fixes here: ``tile_ow`` (TVM's split ``[-1, r]``
    is the register tile ``r``), ``unroll_kw``, ``tile_oh``."""
    data, kernel, strides, padding, dilation, _layout, _out_layout, out_dtype = args
    ent = cfg._entity_map
    try:
        ic_bn = int(ent["tile_ic"].size[-1])
        oc_bn = int(ent["tile_oc"].size[-1])
    except (KeyError, AttributeError, IndexError):
        raise UnmappableRecord(f"{name} without the split knobs tile_ic and tile_oc") from None
    n, c, h, w = (int(d) for d in data[1])
    oc, _, kh, kw = (int(d) for d in kernel[1])
    if c % ic_bn or oc % oc_bn:
        raise UnmappableRecord(f"{name}: blocks {ic_bn}/{oc_bn} do not divide {c}/{oc} channels")
    if name.startswith("depthwise"):
        if ic_bn != oc_bn:
            raise UnmappableRecord(f"{name} with tile_ic {ic_bn} != tile_oc {oc_bn}: the "
                                   "depthwise convolution here has one block in and out")
        kshape: tuple[int, ...] = (oc // oc_bn, 1, kh, kw, 1, oc_bn)
    else:
        kshape = (oc // oc_bn, c // ic_bn, kh, kw, ic_bn, oc_bn)
    new = [["TENSOR", [n, c // ic_bn, h, w, ic_bn], data[2]], ["TENSOR", list(kshape), kernel[2]],
           strides, padding, dilation, f"NCHW{ic_bn}c", f"NCHW{oc_bn}c", out_dtype]
    fixed: dict[str, Any] = {}
    if "tile_ow" in ent:
        fixed["tile_ow"] = int(ent["tile_ow"].size[-1])
    for knob in ("unroll_kw", "tile_oh"):
        if knob in ent:
            fixed[knob] = ent[knob].val
    return new, fixed


def _fit_knobs(space: ConfigSpace, fixed: dict[str, Any], name: str, code_hash: Any
               ) -> ConfigEntity:
    """The point of ``space`` with the ``fixed`` knob values (other knobs: their first
    candidate, the default schedule's choice)."""
    digits, entities = [], OrderedDict()
    for knob, sub in space.space_map.items():
        k = 0
        if knob in fixed:
            vals = [getattr(e, "val", None) for e in sub.entities]
            if fixed[knob] not in vals:
                raise UnmappableRecord(f"{name}: {knob} = {fixed[knob]!r} is not a candidate "
                                       f"here ({vals})")
            k = vals.index(fixed[knob])
        digits.append(k)
        entities[knob] = sub.entities[k]
    return ConfigEntity(space.knob2point(digits), code_hash, entities, [])


def fit_config(space: ConfigSpace, cfg: ConfigEntity, name: str) -> ConfigEntity:
    """``cfg`` expressed in ``space`` (the template's space here): same knobs, values the
    space holds, the index recomputed; UnmappableRecord otherwise."""
    got = cfg._entity_map
    knobs = list(space.space_map)
    extra = [k for k in got if k not in space.space_map]
    missing = [k for k in knobs if k not in got]
    if extra or missing:
        raise UnmappableRecord(f"template {name!r} here has the knobs {knobs}; the record has "
                               f"{list(got)}")
    digits, entities = [], OrderedDict()
    for knob, sub in space.space_map.items():
        value = got[knob]
        try:
            k = sub.entities.index(value)
        except ValueError:
            raise UnmappableRecord(f"knob {knob!r} = {value!r} is not in the space of {name!r} "
                                   f"here ({len(sub.entities)} values, e.g. "
                                   f"{sub.entities[:4]})") from None
        digits.append(k)
        entities[knob] = sub.entities[k]
    return ConfigEntity(space.knob2point(digits), cfg.code_hash, entities, [])


def decode_tvm(row: dict, line: str) -> tuple[Any, Any]:
    """``(MeasureInput, MeasureResult)`` of a TVM log line (parsed JSON ``row``)."""
    from .measure.measure import MeasureInput, MeasureResult
    from .record import _task_of
    from .task.task import TemplateNotFoundError

    try:
        if "config" in row:  # v0.2
            target, name, args, kwargs = row["input"]
            config, result = row["config"], row["result"]
        else:  # v0.1: "i": [target, name, args, kwargs, workload, config]
            target, name, args, kwargs, _, config = row["i"]
            result = row["r"]
        costs, error_no, all_cost, timestamp = result
        if not isinstance(name, str) or not isinstance(args, list) or not isinstance(costs, list):
            raise ValueError("expected [target, task name, [args], kwargs] and [[costs], "
                             "error_no, all_cost, timestamp]")
        cfg = ConfigEntity.from_json_dict(config)
        res = MeasureResult(tuple(costs), int(error_no), float(all_cost), float(timestamp))
    except (ValueError, KeyError, TypeError, IndexError, AttributeError, RecursionError) as err:
        raise ValueError(f"malformed TVM autotvm log line: {line[:120]!r} ({err})") from None
    if kwargs:
        raise UnmappableRecord(f"task {name!r} with keyword arguments {sorted(kwargs)}")
    name = TASK_NAMES.get(name, name)
    args = _adapt_args(name, list(args))
    fixed = None
    if name in _CONV and len(args) == 8 and _is_tensor(args[1]) and len(args[1][1]) == 4:
        args, fixed = _conv_args(name, args, cfg)
    try:
        tsk = _task_of(tvm_target(str(target)), name, args)
    except ValueError as err:
        raise UnmappableRecord(f"target {target!r}: {err}") from None
    try:
        space = tsk.config_space
    except TemplateNotFoundError:
        space = None  # not registered in this process: keep the config as it is
    except Exception as err:  # noqa: BLE001 - the template here rejects TVM's arguments
        raise UnmappableRecord(f"template {name!r} here does not take the arguments {args}: "
                               f"{type(err).__name__}: {err}") from None
    if space is not None:
        cfg = (fit_config(space, cfg, name) if fixed is None
               else _fit_knobs(space, fixed, name, cfg.code_hash))
    elif fixed is not None:
        raise UnmappableRecord(f"template {name!r} is not registered here")
    return MeasureInput(tsk.target, tsk, cfg), res
