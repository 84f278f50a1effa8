"""The GPU kernel emitter (see the package docstring) and PTX from LLVM IR."""
from __future__ import annotations

from llvmlite import ir

from ...errors import CompileError, EmberError
from ...loop.expr import IntImm
from ...loop.passes.verify_threads import verify_threads
from ...loop.stmt import Allocate, Barrier, For, PrimFunc, THREAD_KINDS, WarpMma
from ..llvm import types as T
from ..llvm.codegen import (FunctionEmitter, bind_parameters, check_kernel_names, fastmath_flags, scalar_abi_type,
                            signature_scalars)
from ..llvm.intrinsics import declare

TRIPLE = "nvptx64-nvidia-cuda"
# the NVPTX back end's 64-bit data layout (shared memory addressed with 32 bits)
DATA_LAYOUT = "e-p3:32:32-i64:64-i128:128-v16:16-v32:32-n16:32:64"
SHARED = 3  # the shared-memory address space

_SREG = {"block": "ctaid", "thread": "tid"}


class CudaEmitter(FunctionEmitter):
    """:class:`FunctionEmitter` with the GPU's loops, barriers and shared memory."""

    def __init__(self, module: ir.Module, fn: ir.Function, func_name: str, fastmath: tuple):
        super().__init__(module, fn, func_name, fastmath, returns_status=False)
        self.n_shared = 0

    def _for(self, node: For) -> None:
        if node.kind not in THREAD_KINDS:
            if node.kind == "parallel":
                raise CompileError(f"kernel {self.func_name!r}: loop {node.var.name!r} is parallel (a CPU's "
                                   f"threads); bind it to block_* or thread_* for a GPU")
            return super()._for(node)
        b = self.builder
        which, axis = node.kind.split("_")
        reg = declare(self.module, f"llvm.nvvm.read.ptx.sreg.{_SREG[which]}.{axis}", T.I32, [])
        index = T.cast(b, b.call(reg, []), "int32", node.var.dtype)
        lo = self._as_var_type(node.min, node.var)
        value = b.add(index, lo) if not (isinstance(node.min, IntImm) and node.min.value == 0) else index
        inside = b.icmp_signed("<", index, self._as_var_type(node.extent, node.var))
        with b.if_then(inside):
            with self.bind(node.var, value):
                self.stmt(node.body)

    def barrier(self, node: Barrier) -> None:
        self.builder.call(declare(self.module, "llvm.nvvm.barrier0", ir.VoidType(), []), [])

    def warp_mma(self, node: WarpMma) -> None:
        """``mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}`` as inline PTX: A's 8 values and B's 4
        are read as 4 and 2 words of two, C's 4 floats as they are, D's 4 stored."""
        b = self.builder
        kind = {"bfloat16": "bf16", "float16": "f16"}.get(node.a.dtype)
        if kind is None or node.b.dtype != node.a.dtype or node.c.dtype != "float32" or node.d.dtype != "float32":
            raise CompileError(f"kernel {self.func_name!r}: mma_sync takes float16 or bfloat16 A and B (got "
                               f"{node.a.dtype}, {node.b.dtype}) and float32 C and D (got {node.c.dtype}, {node.d.dtype})")

        def at(buf, offset, k, ty, align):
            mt = T.mem_type(buf.dtype)
            off = b.add(T.cast(b, self.expr(offset), offset.dtype, "int64"), ir.Constant(T.I64, k))
            return b.load(b.gep(self.buffer_ptr(buf), [off], source_etype=mt), typ=ty, align=align)
        words = [at(node.a, node.a_offset, 2 * i, T.I32, 4) for i in range(4)]
        words += [at(node.b, node.b_offset, 2 * i, T.I32, 4) for i in range(2)]
        acc = [at(node.c, node.c_offset, i, T.F32, 4) for i in range(4)]
        out = ir.LiteralStructType([T.F32] * 4)
        asm = ir.InlineAsm(ir.FunctionType(out, [T.I32] * 6 + [T.F32] * 4),
                           f"mma.sync.aligned.m16n8k16.row.col.f32.{kind}.{kind}.f32 "
                           "{$0,$1,$2,$3}, {$4,$5,$6,$7}, {$8,$9}, {$10,$11,$12,$13};",
                           "=f,=f,=f,=f,r,r,r,r,r,r,f,f,f,f", side_effect=False)
        res = b.call(asm, words + acc)
        mt = T.mem_type(node.d.dtype)
        for i in range(4):
            off = b.add(T.cast(b, self.expr(node.d_offset), node.d_offset.dtype, "int64"), ir.Constant(T.I64, i))
            b.store(b.extract_value(res, i), b.gep(self.buffer_ptr(node.d), [off], source_etype=mt), align=4)

    def _allocate(self, node: Allocate) -> None:
        buf = node.buffer
        if buf.scope == "local":
            return super()._allocate(node)
        if buf.scope != "shared":
            raise CompileError(f"kernel {self.func_name!r}: buffer {buf.name!r} ({buf.scope}) would need a heap "
                               f"allocation inside a GPU kernel; make it local or shared")
        n = 1
        for d in buf.shape:
            if not isinstance(d, IntImm):
                raise CompileError(f"kernel {self.func_name!r}: shared buffer {buf.name!r} has the symbolic "
                                   f"shape {buf.shape}")
            n *= d.value
        ty = ir.ArrayType(T.mem_type(buf.dtype), max(n, 1))
        g = ir.GlobalVariable(self.module, ty, f"{self.func_name}.{buf.name}.{self.n_shared}", addrspace=SHARED)
        self.n_shared += 1
        g.linkage = "internal"
        g.align = max(16, T.elem_align(buf.dtype))
        g.initializer = ir.Constant(ty, ir.Undefined)
        generic = self.builder.addrspacecast(g, T.PTR)
        with self.bind_buffer(buf, generic):
            self.stmt(node.body)


def emit_kernel(module: ir.Module, func: PrimFunc) -> ir.Function:
    """Add GPU kernel ``func`` to ``module`` (buffers as pointers, then its size parameters)."""
    buffers, scalars = list(func.buffers), signature_scalars(func)
    ftype = ir.FunctionType(ir.VoidType(), [T.PTR] * len(buffers) + [scalar_abi_type(v.dtype) for v in scalars])
    fn = ir.Function(module, ftype, func.name)
    fn.attributes.add("nounwind")
    e = CudaEmitter(module, fn, func.name, fastmath_flags(func))
    bind_parameters(e, buffers, scalars, align=False)  # (generic pointers: no alignment promised)
    e.stmt(func.body)
    e.finish()
    annotations = module.add_named_metadata("nvvm.annotations")
    annotations.add(module.add_metadata([fn, ir.MetaDataString(module, "kernel"), ir.Constant(T.I32, 1)]))
    return fn


def llvm_ir(funcs: list, target) -> str:
    """The LLVM IR of GPU kernels ``funcs`` (each checked against ``target``'s limits first)."""
    check_kernel_names(funcs)
    module = ir.Module(name="kernels")
    module.triple = TRIPLE
    module.data_layout = DATA_LAYOUT
    for f in funcs:
        verify_threads(f, target.max_threads_per_block, target.max_shared_memory_per_block)
        try:
            emit_kernel(module, f)
        except EmberError:
            raise
        except Exception as exc:  # a bug or an unsupported construct: say which kernel
            raise CompileError(f"kernel {f.name!r}: GPU code generation failed: {type(exc).__name__}: {exc}") from exc
    return str(module)


def ptx(funcs: list, target, opt: int = 3) -> str:
    """PTX text of GPU kernels ``funcs`` (PrimFuncs) for ``target`` (a ``CudaTarget``)."""
    import llvmlite.binding as llvm

    from ..llvm.build import _LLVM_LOCK

    text = llvm_ir(funcs, target)
    with _LLVM_LOCK:
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
        try:
            mod = llvm.parse_assembly(text)
            mod.verify()
        except RuntimeError as exc:
            raise CompileError(f"GPU kernels {[f.name for f in funcs]}: LLVM rejected the IR: {exc}") from exc
        tm = llvm.Target.from_triple(TRIPLE).create_target_machine(cpu=target.arch, features="+ptx80", opt=opt)
        pto = llvm.PipelineTuningOptions(speed_level=opt)
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(mod, pb)
        return tm.emit_assembly(mod)


__all__ = ["CudaEmitter", "DATA_LAYOUT", "TRIPLE", "emit_kernel", "llvm_ir", "ptx"]
