"""The peer runtimes ``ember bench`` times Ember against, each optional.

A peer is a function ``(model path, threads, input infos) -> run`` where ``run(feeds)`` returns
the outputs as numpy arrays, or None when the runtime is not installed (the bench then prints
the note in :data:`INSTALL` and goes on). Each is set up as its users would for fp32 CPU
inference on ``threads`` threads: ONNX Runtime's default graph optimizations, OpenVINO with
the f32 precision hint (and, as ``openvino_default``, with its default hint: bf16 on BF16
CPUs), TVM untuned at opt level 3 for the host CPU.
"""
from __future__ import annotations

import os
import subprocess
import sys
from typing import Callable, Optional

import numpy as np

INSTALL = {"onnxruntime": "pip install onnxruntime", "openvino": "pip install openvino",
           "openvino_default": "pip install openvino",
           "tvm": "pip install apache-tvm (0.27: the Relax frontend)",
           "from_torch": "needs torch, and a zoo model (ember bench --zoo)",
           "inductor": "needs torch, and a zoo model (ember bench --zoo)",
           "ember_auto": "needs an offload backend: apt-get install libdnnl-dev (oneDNN)"}


def onnxruntime(path: str, threads: int, inputs) -> Optional[Callable]:
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.log_severity_level = 3
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return lambda feeds: sess.run(None, feeds)


def openvino(path: str, threads: int, inputs, hint: Optional[str] = "f32") -> Optional[Callable]:
    try:
        import openvino as ov
    except ImportError:
        return None
    core = ov.Core()
    config = {"INFERENCE_NUM_THREADS": str(threads)}
    if hint is not None:
        config["INFERENCE_PRECISION_HINT"] = hint
    compiled = core.compile_model(core.read_model(path), "CPU", config)
    request = compiled.create_infer_request()
    n = len(compiled.outputs)

    def run(feeds):
        request.infer(feeds)
        return [np.array(request.get_output_tensor(i).data) for i in range(n)]

    return run


def tvm(path: str, threads: int, inputs) -> Optional[Callable]:
    os.environ.setdefault("TVM_NUM_THREADS", str(threads))  # read when TVM's runtime starts
    try:
        import onnx
        import tvm as _tvm
        from tvm import relax
        from tvm.relax.frontend.onnx import from_onnx
    except ImportError:
        return None
    mod = from_onnx(onnx.load(path), shape_dict={i.name: list(i.shape) for i in inputs})
    mod = relax.transform.DecomposeOpsForInference()(mod)  # batch norm as arithmetic
    exe = _tvm.compile(mod, target=_tvm.target.Target("llvm -mcpu=" + _host_cpu()))  # the default pipeline
    vm = relax.VirtualMachine(exe, _tvm.cpu())
    names = [i.name for i in inputs]

    def run(feeds):
        out = vm["main"](*[_tvm.nd.array(feeds[n]) for n in names])
        outs = out if isinstance(out, (list, tuple)) or type(out).__name__ == "Array" else [out]
        return [o.numpy() for o in outs]

    return run


def _host_cpu() -> str:
    from ..target import Target

    return Target.host().cpu


def from_torch(path: str, threads: int, inputs) -> Optional[Callable]:
    """Ember through ``ember.from_torch`` on the zoo model's PyTorch source (:mod:`.torch_peers`)."""
    from .torch_peers import from_torch as peer

    return peer(path, threads, inputs)


def inductor(path: str, threads: int, inputs) -> Optional[Callable]:
    """``torch.compile`` with Inductor on the zoo model's PyTorch source (:mod:`.torch_peers`)."""
    from .torch_peers import inductor as peer

    return peer(path, threads, inputs)


def openvino_default(path: str, threads: int, inputs) -> Optional[Callable]:
    """OpenVINO as it runs out of the box: its default precision hint, bf16 on a CPU with
    AVX512-BF16 or AMX (what a user comparing defaults sees), f32 elsewhere."""
    return openvino(path, threads, inputs, hint=None)


def ember_auto(path: str, threads: int, inputs) -> Optional[Callable]:
    """Ember with ``offload="auto"``: each fused group a backend takes (oneDNN) offloaded where
    its kernel measured faster than Ember's (:mod:`ember.compiler.offload`): measured by the
    first compile of the file (the parent's) and kept, each timed process then taking that
    choice as a user's next compile would. None when no backend is available here."""
    import ember
    from ..compiler.offload import auto_backends

    if not auto_backends():
        return None
    # (measured in a process of its own, which keeps the choice: this one may hold the other
    # runtimes' spinning threads, which made Ember alone look faster than offloading ResNet-50
    # here, where each process alone ran it offloaded 1.37x faster)
    subprocess.run([sys.executable, "-c", "import sys, ember; ember.compile(sys.argv[1], offload='auto', wait=True)",
                    path], check=True, capture_output=True)
    exe = ember.compile(path, offload="auto", wait=True)
    exe.threads_per_run = threads
    return lambda feeds: exe.run(**feeds)


PEERS = {"onnxruntime": onnxruntime, "openvino": openvino, "openvino_default": openvino_default, "tvm": tvm,
         "from_torch": from_torch, "inductor": inductor, "ember_auto": ember_auto}
