"""A few runtime helpers (the lanes' futex hand-off, the placement probe) are LLVM IR compiled
in this process for this host: the runtime's own small JIT, apart from the code generator (which
builds shared libraries for a target, a layer above)."""
from __future__ import annotations


def jit_engine(ir_text: str):
    """An MCJIT engine holding ``ir_text`` compiled for this host's CPU; keep it alive as long
    as its functions (``engine.get_function_address(name)``) are called. Raises RuntimeError
    where LLVM cannot (the callers fall back)."""
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    try:
        features = llvm.get_host_cpu_features().flatten()
    except RuntimeError:
        features = ""
    tm = llvm.Target.from_default_triple().create_target_machine(cpu=llvm.get_host_cpu_name(), features=features,
                                                                 opt=3)
    mod = llvm.parse_assembly(ir_text)
    mod.verify()
    engine = llvm.create_mcjit_compiler(mod, tm)
    engine.finalize_object()
    return engine
