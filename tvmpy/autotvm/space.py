"""Configuration spaces of tuning templates (TVM's ``autotvm.task.space``).

A template declares knobs on a :class:`ConfigSpace` (``cfg.define_split``, ``define_reorder``,
``define_knob``, ``define_annotate``). Each knob is a *subspace* with a finite list of entities;
the whole space is the cartesian product of the subspaces in declaration order (``space_map``).
A point of the space is a :class:`ConfigEntity`, addressed by a mixed-radix ``index`` whose least
significant digit is the first declared knob.

The same template code runs in three modes:

* collecting (``task.create``): ``cfg`` is a :class:`ConfigSpace`; ``define_*`` records the
  subspaces and ``cfg[name]`` returns the subspace's first entity so the template can finish;
* applying (``task.instantiate`` / ``apply_history_best``): ``cfg`` is a :class:`ConfigEntity`;
  ``define_*`` does nothing and ``cfg[name]`` returns the chosen entity;
* fallback (untuned workload): ``cfg`` is a :class:`FallbackConfigEntity`; ``define_*`` records
  the subspaces and ``cfg[name]`` returns a sensible default (see :meth:`FallbackConfigEntity`).
"""

from __future__ import annotations

import functools
import itertools
import math
import zlib
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = [
    "InstantiationError", "Axis", "VirtualAxis", "SplitSpace", "SplitEntity", "ReorderSpace", "ReorderEntity",
    "AnnotateSpace", "AnnotateEntity", "OtherOptionSpace", "OtherOptionEntity", "ConfigSpace",
    "ConfigEntity", "FallbackConfigEntity", "get_factors", "get_pow2s",
]


class InstantiationError(ValueError):
    """A configuration is invalid for its template (raised by ``cfg.raise_error``); the
    measurement records it as ``MeasureErrorNo.INSTANTIATION_ERROR``."""


def get_factors(n: int) -> list[int]:
    """All divisors of ``n`` in increasing order."""
    n = int(n)
    if n <= 0:
        raise ValueError(f"get_factors needs a positive integer, got {n}")
    small = [i for i in range(1, math.isqrt(n) + 1) if n % i == 0]
    return sorted(set(small + [n // i for i in small]))


def get_pow2s(n: int) -> list[int]:
    """Powers of two not larger than ``n``: ``[1, 2, 4, ...]``."""
    n = int(n)
    if n <= 0:
        raise ValueError(f"get_pow2s needs a positive integer, got {n}")
    return [1 << i for i in range(n.bit_length())]


def _extent_of(axis: Any) -> int:
    """The constant extent of an IterVar, a :class:`VirtualAxis`, an IntImm or an int."""
    if isinstance(axis, (int, np.integer)):
        return int(axis)
    if isinstance(axis, VirtualAxis):
        return axis.length
    if isinstance(getattr(axis, "value", None), (int, np.integer)):  # an IntImm shape dim
        return int(axis.value)
    if isinstance(axis, Axis):
        raise TypeError("define_split needs a loop axis or an int extent, not the output of a split")
    dom = getattr(axis, "dom", None)
    if dom is None:
        raise TypeError(f"expected an IterVar or an int extent, got {type(axis).__name__}")
    ext = getattr(dom.extent, "value", None)
    if ext is None:
        raise ValueError(f"axis {axis} has a non-constant extent {dom.extent}; autotvm needs constants")
    return int(ext)


class VirtualAxis:
    """An axis known only by its length (``cfg.axis(128)``, ``cfg.axis(iter_var)``): lets a
    template define knobs before it builds its compute."""

    def __init__(self, var: Any, name: str | None = None):
        self.length = _extent_of(var)
        self.name = name or str(getattr(getattr(var, "var", None), "name", f"axis{self.length}"))

    def __repr__(self) -> str:
        return f"VirtualAxis({self.name}, {self.length})"


class Axis:
    """A placeholder for one output axis of a subspace (what ``define_split`` returns)."""

    def __init__(self, space: Any, index: int):
        self.space = space
        self.index = index

    def __repr__(self) -> str:
        return f"Axis({type(self.space).__name__}, {self.index})"


# ---------------------------------------------------------------------------------------------
# subspaces and their entities
class TransformSpace:
    """A subspace: a finite list of entities of one knob."""

    num_output = 0

    def __init__(self) -> None:
        self.entities: list[Any] = []

    def __len__(self) -> int:
        return len(self.entities)

    def __getitem__(self, index: int) -> Any:
        return self.entities[index]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(len={len(self)})"


class SplitEntity:
    """A split of one axis into ``len(size)`` loops; ``size[0] == -1`` means "the rest"."""

    __slots__ = ("size",)

    def __init__(self, size: Sequence[int]):
        self.size = [int(x) for x in size]

    def apply(self, sch: Any, op: Any, axis: Any) -> list[Any]:
        """Split ``axis`` of stage ``sch[op]``; returns the loops outermost first."""
        stage = _stage(sch, op)
        ret = []
        for i in range(1, len(self.size)):
            ax0, ax1 = stage.split(axis, factor=int(np.prod(self.size[i:])))
            ret.append(ax0)
            axis = ax1
        return ret + [axis]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SplitEntity) and self.size == other.size

    def __hash__(self) -> int:
        return hash(("sp", tuple(self.size)))

    def __repr__(self) -> str:
        return f"sp{self.size}"


class SplitSpace(TransformSpace):
    """All ways to split an axis of extent ``product`` into ``num_outputs`` loops.

    Policies: ``factors`` (inner sizes whose product divides the extent), ``power2`` (inner sizes
    powers of two, tails allowed), ``verbose`` (factors and powers of two, tails allowed),
    ``candidate`` (the given size lists). ``max_factor`` bounds each inner size.
    """

    def __init__(self, extent: int, policy: str = "factors", num_outputs: int = 2,
                 max_factor: int | None = None, candidate: Sequence[Sequence[int]] | None = None,
                 filter: Any = None):  # noqa: A002 - TVM's keyword
        super().__init__()
        self._init(extent, policy, num_outputs, max_factor, candidate)
        if filter is not None:
            self.entities = [e for e in self.entities if filter(e)]
            if not self.entities:
                raise ValueError(f"define_split: the filter rejects every split of {self.product}")

    def _init(self, extent: int, policy: str, num_outputs: int, max_factor: int | None,
              candidate: Sequence[Sequence[int]] | None) -> None:
        if not 2 <= int(num_outputs) <= 4:
            raise ValueError(f"define_split: num_outputs must be 2..4, got {num_outputs}")
        self.product = int(extent)
        if self.product <= 0:
            raise ValueError(f"define_split: extent must be positive, got {self.product}")
        self.num_output = int(num_outputs)
        self.policy = policy
        max_factor = self.product if max_factor is None else int(max_factor)
        if policy == "candidate":
            if not candidate:
                raise ValueError("define_split(policy='candidate') needs a non-empty candidate list")
            for c in candidate:
                if len(c) != self.num_output:
                    raise ValueError(f"define_split: candidate {list(c)} has {len(c)} sizes, "
                                     f"num_outputs is {self.num_output}")
                if any(int(x) <= 0 for x in c[1:]):
                    raise ValueError(f"define_split: candidate {list(c)} has a non-positive size")
                self.entities.append(SplitEntity([-1] + [int(x) for x in c[1:]]))
            return
        if policy == "factors":
            factors, no_tail = get_factors(self.product), True
        elif policy == "power2":
            factors, no_tail = get_pow2s(self.product), False
        elif policy == "verbose":
            factors = sorted(set(get_factors(self.product)) | set(get_pow2s(self.product)))
            no_tail = False
        else:
            raise ValueError(f"define_split: unknown policy {policy!r}; "
                             "use 'factors', 'power2', 'verbose' or 'candidate'")
        self.factors = [f for f in factors if f <= max_factor]
        self._generate(0, [0] * (self.num_output - 1), no_tail)

    def _generate(self, now: int, stack: list[int], no_tail: bool) -> None:
        if now == self.num_output - 1:
            prod = functools.reduce(lambda x, y: x * y, stack, 1)
            if prod <= self.product and (self.product % prod == 0 or not no_tail):
                self.entities.append(SplitEntity([-1] + stack[::-1]))
            return
        for f in self.factors:
            stack[now] = f
            self._generate(now + 1, stack, no_tail)


class ReorderEntity:
    """A permutation of the axes given to ``define_reorder``."""

    __slots__ = ("perm",)

    def __init__(self, perm: Sequence[int]):
        self.perm = [int(x) for x in perm]

    def apply(self, sch: Any, op: Any, axes: Sequence[Any]) -> list[Any]:
        """Reorder ``axes`` of ``sch[op]`` by the permutation; returns the new order."""
        if len(axes) != len(self.perm):
            raise ValueError(f"reorder entity of {len(self.perm)} axes applied to {len(axes)}")
        ordered = [axes[i] for i in self.perm]
        _stage(sch, op).reorder(*ordered)
        return ordered

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ReorderEntity) and self.perm == other.perm

    def __hash__(self) -> int:
        return hash(("re", tuple(self.perm)))

    def __repr__(self) -> str:
        return f"re{self.perm}"


def _index_of(axes: Sequence[Any], x: Any) -> int:
    for i, a in enumerate(axes):
        if a is x:
            return i
    raise ValueError(f"define_reorder: candidate axis {x!r} is not one of the axes")


class ReorderSpace(TransformSpace):
    """Orders of ``n`` axes: ``identity``, ``all`` (n! permutations), ``interval_all`` (all
    permutations of ``axes[begin:end]``, ``interval=(begin, end)``), ``candidate`` (lists of the
    same axis objects)."""

    def __init__(self, axes: Sequence[Any], policy: str = "all", **kwargs: Any):
        super().__init__()
        n = len(axes)
        if n == 0:
            raise ValueError("define_reorder needs at least one axis")
        self.num_output = n
        self.policy = policy
        if policy == "identity":
            perms: list[Sequence[int]] = [tuple(range(n))]
        elif policy == "all":
            perms = list(itertools.permutations(range(n)))
        elif policy == "interval_all":
            if "interval" not in kwargs:
                raise ValueError("define_reorder(policy='interval_all') needs interval=(begin, end)")
            begin, end = (int(x) for x in kwargs["interval"])
            if not 0 <= begin < end <= n:
                raise ValueError(f"define_reorder: interval {(begin, end)} out of range for {n} axes")
            pre, post = tuple(range(begin)), tuple(range(end, n))
            perms = [pre + p + post for p in itertools.permutations(range(begin, end))]
        elif policy == "candidate":
            cands = kwargs.get("candidate")
            if not cands:
                raise ValueError("define_reorder(policy='candidate') needs candidate=[[axes...], ...]")
            perms = []
            for c in cands:
                perm = [_index_of(axes, x) for x in c]
                if sorted(perm) != list(range(n)):
                    raise ValueError("define_reorder: each candidate must be a permutation of the axes")
                perms.append(perm)
        else:
            raise ValueError(f"define_reorder: unknown policy {policy!r}; "
                             "use 'identity', 'all', 'interval_all' or 'candidate'")
        self.entities = [ReorderEntity(p) for p in perms]


_ANN_NUMBER = {"none": 0, "unroll": 1, "vec": 2, "parallel": 3}


class AnnotateEntity:
    """One annotation per axis: ``none``, ``unroll``, ``vec`` or ``parallel``."""

    __slots__ = ("anns",)

    def __init__(self, anns: Sequence[str]):
        self.anns = [str(a) for a in anns]

    def apply(self, sch: Any, op: Any, axes: Sequence[Any], axis_lens: Sequence[int] | None = None,
              max_unroll: int | None = None, vec_size: Sequence[int] | None = None,
              cfg: Any = None) -> list[Any]:
        """Annotate ``axes`` of ``sch[op]``. With ``axis_lens``, an unroll longer than
        ``max_unroll`` or a vector length not in ``vec_size`` raises :class:`InstantiationError`."""
        if len(axes) != len(self.anns):
            raise ValueError(f"annotate entity of {len(self.anns)} axes applied to {len(axes)}")
        stage = _stage(sch, op)
        for i, ann in enumerate(self.anns):
            length = axis_lens[i] if axis_lens is not None else None
            if ann == "unroll":
                if max_unroll is not None and length is not None and length > max_unroll:
                    raise InstantiationError(f"too large factor for unrolling: {length}")
                stage.unroll(axes[i])
            elif ann == "vec":
                if vec_size is not None and length is not None and length not in vec_size:
                    raise InstantiationError(f"wrong size of lanes in vectorization: {length}")
                stage.vectorize(axes[i])
            elif ann == "parallel":
                stage.parallel(axes[i])
            elif ann != "none":
                raise ValueError(f"unknown annotation {ann!r}")
        return list(axes)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AnnotateEntity) and self.anns == other.anns

    def __hash__(self) -> int:
        return hash(("an", tuple(self.anns)))

    def __repr__(self) -> str:
        return f"an{self.anns}"


class AnnotateSpace(TransformSpace):
    """Annotations of ``n`` axes. ``vec`` is only offered on the last (innermost) axis.

    Policies: ``none``, ``unroll`` (all), ``vec`` (last), ``parallel`` (first), ``try_unroll``
    (each none/unroll: 2^n), ``try_vec`` (last none/vec: 2), ``try_unroll_vec`` (each but the last
    none/unroll, the last none/unroll/vec: 2^(n-1)*3), ``try_parallel`` (first none/parallel).
    """

    def __init__(self, axes: Sequence[Any], policy: str = "try_unroll_vec"):
        super().__init__()
        n = len(axes)
        if n == 0:
            raise ValueError("define_annotate needs at least one axis")
        self.num_output = n
        self.policy = policy
        last = n - 1
        if policy == "none":
            choices = [["none"]] * n
        elif policy == "unroll":
            choices = [["unroll"]] * n
        elif policy == "vec":
            choices = [["none"]] * last + [["vec"]]
        elif policy == "parallel":
            choices = [["parallel"]] + [["none"]] * last
        elif policy == "try_unroll":
            choices = [["none", "unroll"]] * n
        elif policy == "try_vec":
            choices = [["none"]] * last + [["none", "vec"]]
        elif policy == "try_unroll_vec":
            choices = [["none", "unroll"]] * last + [["none", "unroll", "vec"]]
        elif policy == "try_parallel":
            choices = [["none", "parallel"]] + [["none"]] * last
        else:
            raise ValueError(f"define_annotate: unknown policy {policy!r}; use 'none', 'unroll', "
                             "'vec', 'parallel', 'try_unroll', 'try_vec', 'try_unroll_vec' or "
                             "'try_parallel'")
        self.entities = [AnnotateEntity(c) for c in itertools.product(*choices)]


class OtherOptionEntity:
    """The value of a knob defined with ``define_knob``."""

    __slots__ = ("val",)

    def __init__(self, val: Any):
        self.val = val

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OtherOptionEntity) and self.val == other.val

    def __hash__(self) -> int:
        return hash(("ot", repr(self.val)))

    def __repr__(self) -> str:
        return f"ot({self.val!r})"


class OtherOptionSpace(TransformSpace):
    """A knob with explicit candidate values (JSON-able scalars)."""

    def __init__(self, candidates: Sequence[Any]):
        super().__init__()
        if isinstance(candidates, (str, bytes)) or not len(candidates):
            raise ValueError("define_knob needs a non-empty list of candidates")
        for c in candidates:
            if not isinstance(c, (int, float, str, bool, type(None), np.integer, np.floating)):
                raise TypeError(f"define_knob: candidate {c!r} is not a JSON scalar")
        self.entities = [OtherOptionEntity(c.item() if isinstance(c, np.generic) else c)
                         for c in candidates]


def _stage(sch: Any, op: Any) -> Any:
    """``sch[op]`` for a Tensor/Operation, or the stage itself."""
    from ..te.schedule import Stage

    return op if isinstance(op, Stage) else sch[op]


# ---------------------------------------------------------------------------------------------
# the space and its points
class ConfigSpace:
    """The search space of a template; also the ``cfg`` a template sees while it is collected."""

    def __init__(self) -> None:
        self.space_map: OrderedDict[str, TransformSpace] = OrderedDict()
        self._entity_map: OrderedDict[str, Any] = OrderedDict()
        self._collect = True
        self._length: int | None = None
        self.flop = 0
        self.code_hash: str | None = None
        self.errors: list[str] = []
        self.is_fallback = False

    # -- declaring knobs --------------------------------------------------------------------
    def _add(self, name: str, space: TransformSpace) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"knob name must be a non-empty string, got {name!r}")
        if name in self.space_map:
            raise ValueError(f"knob {name!r} is defined twice")
        self.space_map[name] = space
        self._entity_map[name] = self._default_entity(name, space)
        self._length = None

    def _default_entity(self, name: str, space: TransformSpace) -> Any:
        return space[0]

    def define_split(self, name: str, axis: Any, policy: str = "factors", num_outputs: int = 2,
                     max_factor: int | None = None, candidate: Sequence[Sequence[int]] | None = None,
                     **kwargs: Any) -> list[Axis]:
        """Split ``axis`` (an IterVar, ``cfg.axis(..)`` or an int extent) into ``num_outputs``
        tiled loops. ``filter=lambda entity: bool`` keeps only some splits."""
        if self._collect:
            space = SplitSpace(_extent_of(axis), policy, num_outputs, max_factor, candidate,
                               kwargs.get("filter"))
            self._add(name, space)
            return [Axis(space, i) for i in range(space.num_output)]
        return [Axis(None, i) for i in range(int(num_outputs))]

    def define_reorder(self, name: str, axes: Sequence[Any], policy: str = "all",
                       **kwargs: Any) -> list[Axis]:
        """Choose an order of ``axes`` (see :class:`ReorderSpace` for the policies)."""
        if self._collect:
            space = ReorderSpace(axes, policy, **kwargs)
            self._add(name, space)
            return [Axis(space, i) for i in range(space.num_output)]
        return [Axis(None, i) for i in range(len(axes))]

    def define_annotate(self, name: str, axes: Sequence[Any], policy: str = "try_unroll_vec",
                        **kwargs: Any) -> list[Axis]:
        """Choose an annotation for each of ``axes`` (see :class:`AnnotateSpace`)."""
        if self._collect:
            space = AnnotateSpace(axes, policy)
            self._add(name, space)
            return [Axis(space, i) for i in range(space.num_output)]
        return [Axis(None, i) for i in range(len(axes))]

    def define_knob(self, name: str, candidate: Sequence[Any]) -> None:
        """A knob with explicit candidate values; the template reads ``cfg[name].val``."""
        if self._collect:
            self._add(name, OtherOptionSpace(candidate))

    @staticmethod
    def axis(var: Any) -> VirtualAxis:
        """A virtual axis of the length of ``var`` (an IterVar or an int)."""
        return VirtualAxis(var)

    reduce_axis = axis

    def add_flop(self, flop: float) -> None:
        """Add to the template's FLOP count (used instead of counting the compute)."""
        if not isinstance(flop, (int, float, np.integer, np.floating)) or flop < 0:
            raise ValueError(f"add_flop needs a non-negative number, got {flop!r}")
        self.flop += float(flop)

    def raise_error(self, msg: str) -> None:
        """Mark this configuration invalid (raises :class:`InstantiationError`)."""
        self.errors.append(msg)
        raise InstantiationError(msg)

    def valid(self) -> bool:
        return not self.errors

    # -- the space --------------------------------------------------------------------------
    def dims(self) -> list[int]:
        """The size of each subspace, in declaration order."""
        return [len(s) for s in self.space_map.values()]

    def __len__(self) -> int:
        if self._length is None:
            self._length = int(np.prod(self.dims(), dtype=object)) if self.space_map else 1
        return self._length

    @property
    def range_length(self) -> int:
        return len(self)

    def point2knob(self, index: int) -> list[int]:
        """The per-subspace indices (mixed radix, first knob least significant) of ``index``."""
        index = int(index)
        if not 0 <= index < len(self):
            raise IndexError(f"config index {index} out of range [0, {len(self)})")
        knob = []
        for d in self.dims():
            knob.append(index % d)
            index //= d
        return knob

    def knob2point(self, knob: Sequence[int]) -> int:
        """The inverse of :meth:`point2knob`."""
        dims = self.dims()
        if len(knob) != len(dims):
            raise ValueError(f"knob has {len(knob)} digits, the space has {len(dims)} subspaces")
        index, mult = 0, 1
        for k, d in zip(knob, dims):
            if not 0 <= int(k) < d:
                raise IndexError(f"knob digit {k} out of range [0, {d})")
            index += int(k) * mult
            mult *= d
        return index

    def get(self, index: int) -> ConfigEntity:
        """The configuration at ``index`` (0 <= index < len(self))."""
        knob = self.point2knob(index)
        entities = OrderedDict((name, space[k])
                               for (name, space), k in zip(self.space_map.items(), knob))
        return ConfigEntity(int(index), self.code_hash, entities, [])

    def __iter__(self):
        return (self.get(i) for i in range(len(self)))

    def __getitem__(self, name: str) -> Any:
        """The entity of knob ``name`` (while collecting: the subspace's first entity)."""
        try:
            return self._entity_map[name]
        except KeyError:
            raise KeyError(f"knob {name!r} is not defined in this config "
                           f"(defined: {list(self._entity_map)})") from None

    def __contains__(self, name: str) -> bool:
        return name in self._entity_map

    def __repr__(self) -> str:
        lines = [f"ConfigSpace (len={len(self)}, space_map=", ]
        for i, (name, space) in enumerate(self.space_map.items()):
            lines.append(f"  {i:2d} {name}: {space}")
        return "\n".join(lines) + ")"


def _feature_of(val: Any) -> float:
    if isinstance(val, (bool, int, float, np.integer, np.floating)):
        return float(val)
    if val is None:
        return 0.0
    return float(zlib.crc32(str(val).encode()) % 1024)


class ConfigEntity(ConfigSpace):
    """One point of a :class:`ConfigSpace`: the knob values a template reads when applied."""

    def __init__(self, index: int, code_hash: str | None, entity_map: dict[str, Any],
                 constraints: Sequence[Any] | None = None):
        super().__init__()
        self.index = int(index)
        self._collect = False
        self._entity_map = OrderedDict(entity_map)
        self._space_map = None
        self.code_hash = code_hash
        self.constraints = list(constraints or [])

    def get_flatten_feature(self) -> np.ndarray:
        """Numeric features of the knob values (split sizes, permutations, one-hot
        annotations, knob values), in declaration order."""
        fea: list[float] = []
        for v in self._entity_map.values():
            if isinstance(v, SplitEntity):
                fea.extend(float(x) for x in v.size)
            elif isinstance(v, ReorderEntity):
                fea.extend(float(x) for x in v.perm)
            elif isinstance(v, AnnotateEntity):
                for ann in v.anns:
                    onehot = [0.0] * len(_ANN_NUMBER)
                    onehot[_ANN_NUMBER[ann]] = 1.0
                    fea.extend(onehot)
            elif isinstance(v, OtherOptionEntity):
                fea.append(_feature_of(v.val))
        return np.array(fea, dtype=np.float32)

    def get_other_option(self) -> dict[str, Any]:
        return {k: v.val for k, v in self._entity_map.items() if isinstance(v, OtherOptionEntity)}

    def to_json_dict(self) -> dict[str, Any]:
        """A JSON-able dict: ``{"index", "code_hash", "entity": [[name, kind, value], ...]}``."""
        ent = []
        for name, v in self._entity_map.items():
            if isinstance(v, SplitEntity):
                ent.append([name, "sp", list(v.size)])
            elif isinstance(v, ReorderEntity):
                ent.append([name, "re", list(v.perm)])
            elif isinstance(v, AnnotateEntity):
                ent.append([name, "an", list(v.anns)])
            elif isinstance(v, OtherOptionEntity):
                ent.append([name, "ot", v.val])
            else:
                raise RuntimeError(f"cannot serialize knob {name!r} of type {type(v).__name__}")
        return {"index": self.index, "code_hash": self.code_hash, "entity": ent}

    @staticmethod
    def from_json_dict(json_dict: dict[str, Any]) -> ConfigEntity:
        """The inverse of :meth:`to_json_dict`."""
        if not isinstance(json_dict, dict) or "entity" not in json_dict:
            raise ValueError(f"not a config JSON dict: {json_dict!r}")
        kinds = {"sp": SplitEntity, "re": ReorderEntity, "an": AnnotateEntity,
                 "ot": OtherOptionEntity}
        entity_map: OrderedDict[str, Any] = OrderedDict()
        for item in json_dict["entity"]:
            if len(item) != 3 or item[1] not in kinds:
                raise ValueError(f"bad config entity {item!r}")
            name, kind, value = item
            entity_map[str(name)] = kinds[kind](value)
        return ConfigEntity(int(json_dict.get("index", -1)), json_dict.get("code_hash"),
                            entity_map, json_dict.get("constraints", []))

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, ConfigEntity) and self.index == other.index
                and list(self._entity_map.items()) == list(other._entity_map.items()))

    def __hash__(self) -> int:
        return hash((self.index, tuple(self._entity_map.items())))

    def __repr__(self) -> str:
        """TVM's form: ``[('tile_y', [-1, 4]), ('unroll', True)],<code_hash>,<index>`` (the
        per-trial DEBUG line and logs people compare with TVM's print it)."""
        items = ", ".join(f"({name!r}, {_plain_value(v)})" for name, v in self._entity_map.items())
        return f"[{items}],{self.code_hash},{self.index}"


def _plain_value(v: Any) -> str:
    """A knob value as TVM prints it inside a config: the list or value, without the kind."""
    for attr in ("size", "perm", "anns", "val"):
        if hasattr(v, attr):
            return str(getattr(v, attr))
    return str(v)


class FallbackConfigEntity(ConfigSpace):
    """The configuration of an untuned workload: every knob gets a sensible default.

    Splits put the largest divisor of the extent not above ``vector_size`` innermost (the other
    inner sizes 1); reorders keep the given order; annotations are ``none``; knobs take their
    first candidate. ``fallback_split`` and ``fallback_with_reference_log`` refine them.
    """

    def __init__(self, vector_size: int | None = None) -> None:
        super().__init__()
        self.is_fallback = True
        self.index = -1
        if vector_size is None:
            vector_size = _default_vector_size()
        self.vector_size = max(1, int(vector_size))

    def _add(self, name: str, space: TransformSpace) -> None:
        """A fallback config is cached per workload and the template runs again with it: a
        knob defined again keeps the entity chosen before (default or set by hand)."""
        if name in self.space_map and type(self.space_map[name]) is type(space):
            self.space_map[name] = space
            self._length = None
            return
        self.space_map.pop(name, None)
        self._entity_map.pop(name, None)
        super()._add(name, space)

    def _default_entity(self, name: str, space: TransformSpace) -> Any:
        if isinstance(space, SplitSpace):
            return self._default_split(space)
        if isinstance(space, ReorderSpace):
            ident = ReorderEntity(range(space.num_output))
            return ident if ident in space.entities else space[0]
        if isinstance(space, AnnotateSpace):
            none = AnnotateEntity(["none"] * space.num_output)
            return none if none in space.entities else space[0]
        return space[0]

    def _default_split(self, space: SplitSpace) -> SplitEntity:
        """Among the space's splits: the largest innermost size not above ``vector_size``,
        preferring divisors of the extent and middle sizes of 1."""
        def score(e: SplitEntity) -> tuple:
            inner = e.size[-1]
            return (inner <= self.vector_size, space.product % inner == 0,
                    all(x == 1 for x in e.size[1:-1]), inner if inner <= self.vector_size else -inner)

        return max(space.entities, key=score)

    def fallback_split(self, name: str, constraints: Sequence[int]) -> None:
        """Set split ``name`` to the largest sizes within ``constraints`` (one bound per output,
        innermost chosen first; -1 means unbounded)."""
        space = self.space_map.get(name)
        if not isinstance(space, SplitSpace):
            raise ValueError(f"{name!r} is not a split knob of this template")
        if len(constraints) != space.num_output:
            raise ValueError(f"fallback_split({name!r}): {len(constraints)} constraints for "
                             f"{space.num_output} outputs")
        bounds = [math.inf if c == -1 else c for c in constraints]
        size = [0] * space.num_output
        now = space.product
        for i in reversed(range(space.num_output)):
            ok = [f for f in get_factors(now) if f <= bounds[i]]
            if not ok:
                raise RuntimeError(f"cannot find a feasible fallback split for {name!r}")
            size[i] = ok[-1]
            now //= ok[-1]
        size[0] = -1
        self._entity_map[name] = SplitEntity(size)

    def fallback_with_reference_log(self, ref_log: Sequence[Any]) -> None:
        """Copy the knobs of the record in ``ref_log`` (``(MeasureInput, MeasureResult)`` pairs)
        whose split extents share the most factors with this workload's."""
        split_names = [n for n, s in self.space_map.items() if isinstance(s, SplitSpace)]
        mine = [set(get_factors(self.space_map[n].product)) for n in split_names]
        best_cfg, best_score = None, 0.0
        for inp, _ in ref_log:
            cfg = inp.config
            score = 0.0
            try:
                for n, fs in zip(split_names, mine):
                    other = set(get_factors(abs(int(np.prod(cfg[n].size)))))
                    score += len(fs & other) / len(fs)
            except (KeyError, AttributeError):
                continue
            if score > best_score:
                best_cfg, best_score = cfg, score
        if best_cfg is None:
            return
        for n in split_names:
            cons = list(best_cfg[n].size)
            cons[0] = -1
            self.fallback_split(n, cons)
        for n, s in self.space_map.items():
            if not isinstance(s, SplitSpace) and n in best_cfg and best_cfg[n] in s.entities:
                self._entity_map[n] = best_cfg[n]

    def __setitem__(self, name: str, entity: Any) -> None:
        """Set a knob by hand (templates' default schedules do ``cfg["tile"] = SplitEntity(..)``)."""
        self._entity_map[name] = entity

    def __repr__(self) -> str:
        return f"{','.join(str(v) for v in self._entity_map.values())},fallback"


def _default_vector_size() -> int:
    """Lanes of float32 on the current target (16 with AVX-512, 8 with AVX2)."""
    from ..target import Target

    tgt = Target.current()
    return _lanes_f32(str(tgt) if tgt is not None else "llvm")


@functools.lru_cache(maxsize=64)
def _lanes_f32(target: str) -> int:
    from ..target import Target

    try:
        return Target(target).vector_lanes("float32")
    except Exception:  # noqa: BLE001 - a target without vector information
        return 8
