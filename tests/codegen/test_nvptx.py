"""GPU code generation without a GPU (issue 49, item 3 begun): thread-bound loop programs to
PTX through llvmlite's NVPTX back end, checked by ptxas (the nvidia-cuda-nvcc wheel) for sm_80
and sm_90. Running the PTX needs a GPU; its logic runs on the CPU in tests/loop/test_gpu_threads.py."""
import pytest

import ember
from ember.codegen.nvptx import assemble, ptx, ptxas_path
from ember.errors import CompileError, LoweringError
from ember.loop import compute as te
from ember.loop import expr as E
from ember.loop import parse
from ember.loop.lower import lower
from ember.loop.passes import default_pipeline
from ember.loop.schedule import Schedule
from ember.target import as_target
from tests.loop.test_gpu_threads import REVERSE, TILED_MATMUL

needs_ptxas = pytest.mark.skipif(ptxas_path() is None, reason="no ptxas: pip install nvidia-cuda-nvcc-cu12 (the test extra)")


def _elementwise():
    """exp(a) / (1 + tanh(a)) over 4096 elements, 256 threads a block: a schedule's kernel."""
    a = te.placeholder((4096,), "float32", "a")
    b = te.compute((4096,), lambda i: E.Call("float32", "exp", (a[i],)) / (1.0 + E.Call("float32", "tanh", (a[i],))), "b")
    s = Schedule(b)
    (i,) = s[b].leaf
    bo, bi = s[b].split(i, factor=256)
    s[b].bind(bo, "block_x")
    s[b].bind(bi, "thread_x")
    return default_pipeline(lower(s, [a, b], "ew"))


@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_gpu_kernels_compile_to_ptx_that_ptxas_assembles(arch):
    text = ptx([parse(TILED_MATMUL), parse(REVERSE), _elementwise()], as_target(f"cuda -arch={arch}"))
    assert f".target {arch}" in text and ".visible .entry mm(" in text
    assert "bar.sync" in text and "st.shared" in text and "%ctaid.x" in text and "%tid.y" in text
    assert "call" not in text  # (the math is Ember's own polynomials: no libm on a GPU)
    assert len(assemble(text, arch)) > 0


@needs_ptxas
def test_ptxas_refusing_the_ptx_is_a_compile_error_with_its_message():
    text = ptx([_elementwise()], as_target("cuda -arch=sm_90"))
    with pytest.raises(CompileError, match="ptxas refused the PTX for sm_80"):
        assemble(text, "sm_80")  # (PTX for sm_90 is not sm_80's)


def test_a_kernel_over_the_targets_limits_is_refused_before_code_is_made():
    big = TILED_MATMUL.replace('(16, 16), "float32", scope="shared") as Bs', '(256, 256), "float32", scope="shared") as Bs')
    with pytest.raises(LoweringError, match=r"263168 bytes .*over the limit of 166912 a block"):
        ptx([parse(big)], as_target("cuda -arch=sm_80"))


def test_what_a_gpu_kernel_cannot_hold_is_named():
    heap = '''
def k(a: Buffer((n,), "float32"), n: int64):
    for bx in block_x(1):
        with allocate("t", (n,), "float32") as t:
            for tx in thread_x(32):
                t[tx] = 1.0
                a[tx] = t[tx]
'''
    with pytest.raises(CompileError, match="heap allocation inside a GPU kernel"):
        ptx([parse(heap)], as_target("cuda -arch=sm_90"))


def test_a_barrier_in_a_cpu_kernel_is_an_error_naming_the_cpu_path():
    with pytest.raises(CompileError, match="threads_on_cpu"):
        ember.build(parse(REVERSE.replace("block_x", "serial").replace("thread_x", "serial")))

