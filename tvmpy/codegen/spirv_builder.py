"""A small SPIR-V module builder (as TVM's ``codegen/spirv/ir_builder``): ids, the module's
sections in the order the specification requires, cached types / constants / pointer types,
decorations, and the instruction stream of one function.

Only what Vulkan compute shaders need: ``Shader`` capability, logical addressing, the GLSL450
memory model, ``GLSL.std.450`` extended instructions, SPIR-V 1.3 (Vulkan 1.1: the
``StorageBuffer`` storage class is core). Words are little-endian 32-bit; :meth:`Builder.finish`
returns the binary a ``vkCreateShaderModule`` / ``spirv-val`` takes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

__all__ = ["Builder", "Op", "SC", "Value", "SPIRV_VERSION"]

SPIRV_VERSION = 0x00010300  # 1.3: Vulkan 1.1
_MAGIC = 0x07230203


class Op:
    """Opcodes used by the code generator (SPIR-V unified specification, section 3.49)."""

    Name, MemberName, Extension, ExtInstImport, ExtInst = 5, 6, 10, 11, 12
    MemoryModel, EntryPoint, ExecutionMode, Capability = 14, 15, 16, 17
    TypeVoid, TypeBool, TypeInt, TypeFloat, TypeVector = 19, 20, 21, 22, 23
    TypeArray, TypeRuntimeArray, TypeStruct, TypePointer, TypeFunction = 28, 29, 30, 32, 33
    ConstantTrue, ConstantFalse, Constant = 41, 42, 43
    Function, FunctionEnd, Variable, Load, Store, AccessChain = 54, 56, 59, 61, 62, 65
    Decorate, MemberDecorate, CompositeExtract = 71, 72, 81
    ConvertFToU, ConvertFToS, ConvertSToF, ConvertUToF = 109, 110, 111, 112
    UConvert, SConvert, FConvert, Bitcast = 113, 114, 115, 124
    SNegate, FNegate, IAdd, FAdd, ISub, FSub, IMul, FMul = 126, 127, 128, 129, 130, 131, 132, 133
    UDiv, SDiv, FDiv, UMod, SRem, SMod, FRem, FMod = 134, 135, 136, 137, 138, 139, 140, 141
    IsNan, IsInf = 156, 157
    LogicalEqual, LogicalNotEqual, LogicalOr, LogicalAnd, LogicalNot, Select = 164, 165, 166, 167, 168, 169
    IEqual, INotEqual, UGreaterThan, SGreaterThan, UGreaterThanEqual, SGreaterThanEqual = \
        170, 171, 172, 173, 174, 175
    ULessThan, SLessThan, ULessThanEqual, SLessThanEqual = 176, 177, 178, 179
    FOrdEqual, FOrdNotEqual, FUnordNotEqual, FOrdLessThan = 180, 182, 183, 184
    FOrdGreaterThan, FOrdLessThanEqual, FOrdGreaterThanEqual = 186, 188, 190
    ShiftRightLogical, ShiftRightArithmetic, ShiftLeftLogical = 194, 195, 196
    BitwiseOr, BitwiseXor, BitwiseAnd, Not, BitCount = 197, 198, 199, 200, 205
    ControlBarrier, MemoryBarrier = 224, 225
    LoopMerge, SelectionMerge, Label, Branch, BranchConditional, Return = 246, 247, 248, 249, 250, 253


class SC:
    """Storage classes."""

    Input, Uniform, Workgroup, Private, Function, PushConstant, StorageBuffer = 1, 2, 4, 6, 7, 9, 12


class Dec:
    Block, ArrayStride, BuiltIn, NonWritable, Binding, DescriptorSet, Offset = 2, 6, 11, 24, 33, 34, 35


CAPABILITIES = {"Shader": 1, "Float16": 9, "Float64": 10, "Int64": 11, "Int16": 22, "Int8": 39,
                "StorageBuffer16BitAccess": 4433, "StorageBuffer8BitAccess": 4448}


@dataclass(frozen=True)
class Value:
    """An SSA id with its element dtype ("float32", "int32", "bool", ...)."""

    id: int
    dtype: str


def _string_words(s: str) -> list[int]:
    data = s.encode() + b"\0"
    data += b"\0" * (-len(data) % 4)
    return list(struct.unpack(f"<{len(data) // 4}I", data))


def _words(op: int, operands: list[int]) -> list[int]:
    return [((len(operands) + 1) << 16) | op, *operands]


class Builder:
    """Accumulates one SPIR-V module. Types and constants are cached by dtype / value."""

    def __init__(self) -> None:
        self.bound = 1
        self.capabilities: set[str] = {"Shader"}
        self.extensions: set[str] = set()
        self.entry: list[int] = []
        self.modes: list[int] = []
        self.debug: list[int] = []
        self.decorations: list[int] = []
        self.globals: list[int] = []  # types, constants, global variables (in order)
        self.func_vars: list[int] = []  # Function-storage variables (entry block head)
        self.body: list[int] = []  # the function's blocks after its first label
        self._types: dict[object, int] = {}
        self._consts: dict[tuple[str, object], int] = {}
        self._glsl = 0
        self._label_open = False

    def new_id(self) -> int:
        self.bound += 1
        return self.bound - 1

    # ---- types -------------------------------------------------------------------------------
    def _type(self, key: object, op: int, operands: list[int]) -> int:
        tid = self._types.get(key)
        if tid is None:
            tid = self._types[key] = self.new_id()
            self.globals += _words(op, [tid, *operands])
        return tid

    def t_void(self) -> int:
        return self._type("void", Op.TypeVoid, [])

    def t_scalar(self, dtype: str) -> int:
        """The SPIR-V type of a scalar dtype (int8..64, uint8..64, float16..64, bool)."""
        if dtype == "bool":
            return self._type(dtype, Op.TypeBool, [])
        if dtype.startswith("float"):
            bits = int(dtype[5:])
            if bits == 64:
                self.capabilities.add("Float64")
            elif bits == 16:
                self.capabilities.add("Float16")
            return self._type(dtype, Op.TypeFloat, [bits])
        signed = 0 if dtype.startswith("uint") else 1
        bits = int(dtype[4:] if signed == 0 else dtype[3:])
        cap = {64: "Int64", 16: "Int16", 8: "Int8"}.get(bits)
        if cap:
            self.capabilities.add(cap)
        return self._type(dtype, Op.TypeInt, [bits, signed])

    def t_vec3_uint(self) -> int:
        return self._type("v3uint", Op.TypeVector, [self.t_scalar("uint32"), 3])

    def t_pointer(self, storage: int, pointee: int) -> int:
        return self._type(("ptr", storage, pointee), Op.TypePointer, [storage, pointee])

    def t_array(self, elem: int, count: int) -> int:
        return self._type(("arr", elem, count), Op.TypeArray, [elem, self.const("uint32", count)])

    def t_function(self, ret: int) -> int:
        return self._type(("fn", ret), Op.TypeFunction, [ret])

    def t_buffer_block(self, elem_dtype: str, stride: int) -> int:
        """``struct { T data[]; }`` decorated Block, its array ArrayStride ``stride``."""
        key = ("block", elem_dtype)
        tid = self._types.get(key)
        if tid is not None:
            return tid
        rt = self._type(("rtarr", elem_dtype), Op.TypeRuntimeArray, [self.t_scalar(elem_dtype)])
        self.decorate(rt, Dec.ArrayStride, stride)
        tid = self._type(key, Op.TypeStruct, [rt])
        self.decorate(tid, Dec.Block)
        self.member_decorate(tid, 0, Dec.Offset, 0)
        return tid

    def t_struct(self, members: list[int], offsets: list[int], key: object) -> int:
        tid = self._type(key, Op.TypeStruct, members)
        self.decorate(tid, Dec.Block)
        for k, off in enumerate(offsets):
            self.member_decorate(tid, k, Dec.Offset, off)
        return tid

    # ---- constants ---------------------------------------------------------------------------
    def const(self, dtype: str, value: object) -> int:
        key = (dtype, value)
        cid = self._consts.get(key)
        if cid is not None:
            return cid
        t = self.t_scalar(dtype)
        cid = self.new_id()
        if dtype == "bool":
            self.globals += _words(Op.ConstantTrue if value else Op.ConstantFalse, [t, cid])
        else:
            self.globals += _words(Op.Constant, [t, cid, *self._literal(dtype, value)])
        self._consts[key] = cid
        return cid

    @staticmethod
    def _literal(dtype: str, value: object) -> list[int]:
        if dtype.startswith("float"):
            bits = int(dtype[5:])
            fmt = {16: "<e", 32: "<f", 64: "<d"}[bits]
            data = struct.pack(fmt, float(value))  # type: ignore[arg-type]
        else:
            bits = int(dtype.lstrip("uint") or 32)
            v = int(value) & ((1 << bits) - 1)  # type: ignore[call-overload]
            data = v.to_bytes(max(bits // 8, 1), "little")
        data += b"\0" * (-len(data) % 4)
        return list(struct.unpack(f"<{len(data) // 4}I", data))

    # ---- module-level declarations -----------------------------------------------------------
    def decorate(self, target: int, decoration: int, *operands: int) -> None:
        self.decorations += _words(Op.Decorate, [target, decoration, *operands])

    def member_decorate(self, struct_id: int, member: int, decoration: int, *operands: int) -> None:
        self.decorations += _words(Op.MemberDecorate, [struct_id, member, decoration, *operands])

    def name(self, target: int, text: str) -> None:
        self.debug += _words(Op.Name, [target, *_string_words(text)])

    def global_var(self, ptr_type: int, storage: int) -> int:
        vid = self.new_id()
        self.globals += _words(Op.Variable, [ptr_type, vid, storage])
        return vid

    def function_var(self, ptr_type: int) -> int:
        vid = self.new_id()
        self.func_vars += _words(Op.Variable, [ptr_type, vid, SC.Function])
        return vid

    def glsl(self) -> int:
        if not self._glsl:
            self._glsl = self.new_id()
        return self._glsl

    # ---- instructions ------------------------------------------------------------------------
    def emit(self, op: int, *operands: int) -> None:
        self.body += _words(op, list(operands))

    def op(self, op: int, result_type: int, *operands: int) -> int:
        """Emit an instruction with a result; return the result id."""
        rid = self.new_id()
        self.body += _words(op, [result_type, rid, *operands])
        return rid

    def ext(self, result_type: int, inst: int, *operands: int) -> int:
        return self.op(Op.ExtInst, result_type, self.glsl(), inst, *operands)

    def label(self, lid: int) -> None:
        self.body += _words(Op.Label, [lid])

    # ---- the module --------------------------------------------------------------------------
    def finish(self, entry_name: str, interface: list[int], local_size: tuple[int, int, int]) -> bytes:
        """The module's binary: one GLCompute entry point ``entry_name`` whose body is
        ``self.body`` (which must end its last block)."""
        fn = self.new_id()
        first = self.new_id()
        void = self.t_void()
        fn_type = self.t_function(void)
        words: list[int] = [_MAGIC, SPIRV_VERSION, 0, 0, 0]
        for cap in sorted(self.capabilities, key=CAPABILITIES.__getitem__):
            words += _words(Op.Capability, [CAPABILITIES[cap]])
        for ext in sorted(self.extensions):
            words += _words(Op.Extension, _string_words(ext))
        if self._glsl:
            words += _words(Op.ExtInstImport, [self._glsl, *_string_words("GLSL.std.450")])
        words += _words(Op.MemoryModel, [0, 1])  # Logical, GLSL450
        words += _words(Op.EntryPoint, [5, fn, *_string_words(entry_name), *interface])
        words += _words(Op.ExecutionMode, [fn, 17, *local_size])  # LocalSize
        words += self.debug + self.decorations + self.globals
        words += _words(Op.Function, [void, fn, 0, fn_type])
        words += _words(Op.Label, [first]) + self.func_vars + self.body
        words += _words(Op.FunctionEnd, [])
        words[3] = self.bound
        return struct.pack(f"<{len(words)}I", *words)
