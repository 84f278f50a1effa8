"""The peak kernels (``ember.profile.peak``) time the instruction they name: nothing here
asserts a speed, only what the optimized kernel computes in its loop."""
import importlib
import re

import pytest

from ember.codegen.llvm import build
from ember.profile.peak import fma_peak_kernel
from ember.target import Target

AVX2 = Target.from_string("llvm -mcpu=znver3")  # (no VNNI: a dot is an instruction sequence)


@pytest.mark.parametrize("dot,instruction", [("dot_u8i7x4", "pmadd.ub.sw"), ("dot_i16x2", "pmadd.wd"),
                                             ("dot_u8i8x4", "pmadd.wd")])
def test_an_avx2_dot_peak_runs_a_dot_per_accumulator_in_its_loop(dot, instruction, monkeypatch, capfd, tmp_path):
    # (a dot of loop invariants was hoisted out of the loop, which then timed vector adds:
    # 1219 "GOP/s" for pmaddubsw on a Zen 3 whose FMA peak is 190 GFLOP/s)
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))  # (compiled here: the optimized IR printed)
    monkeypatch.setattr(importlib.import_module("ember.codegen.llvm.build"), "debug_level", lambda: 3)
    func, _ = fma_peak_kernel(8, 1, accumulators=12, dot=dot)
    build([func], target=AVX2, name=func.name)
    ir = capfd.readouterr().err
    body = ir[ir.index("=== optimized LLVM IR"):]
    calls = len(re.findall(r"call <\d+ x i\d+> @llvm\.x86\.avx2\." + re.escape(instruction), body))
    assert calls >= 12
