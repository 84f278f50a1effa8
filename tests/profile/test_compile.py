"""The compile-time profile: phases, per-kernel LLVM times, the cache, the budget report."""
import json

import ember
from ember.cli import main
from ember.profile.compile import PHASES


def test_cold_then_warm_compile(conv_net_path, tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))  # cold: nothing compiled yet
    cold = ember.compile(conv_net_path, name="convnet").compile_profile
    assert cold.model == "convnet" and cold.kernels and not any(k.cached for k in cold.kernels)
    assert any(name.startswith("pass fuse_ops") for name in cold.phases)
    for k in cold.kernels:
        assert all(k.times[p] >= 0 for p in PHASES) and k.llvm > 0 and k.loops >= 1 and k.llvm_lines > 0
    assert cold.link > 0
    warm = ember.compile(conv_net_path, name="convnet").compile_profile
    assert all(k.cached for k in warm.kernels) and all(k.llvm == 0 for k in warm.kernels)
    text = cold.table(top=2, budget=0.0)  # every kernel is over a zero budget
    assert "LLVM optimization" in text and "slowest 2 kernels" in text
    assert "over the 0 s LLVM budget" in text and "its schedule:" in text and ".parallel(" in text
    doc = json.loads(cold.to_json())
    assert {k["name"] for k in doc["kernels"]} == {k.name for k in cold.kernels}


def test_kernel_objects_are_shared_between_models(conv_net_path, tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    ember.compile(conv_net_path)
    # opt level 1 changes nothing in these kernels, but the model differs: objects are reused
    prof = ember.compile(conv_net_path, opt_level=2, disabled_passes=["cse"]).compile_profile
    assert all(k.cached for k in prof.kernels)


def test_cli_profile_compile(conv_net_path, tmp_path, capsys):
    out = str(tmp_path / "m.so")
    assert main(["compile", conv_net_path, "-o", out, "--profile-compile", "--compile-budget", "1000",
                 "--profile-json", str(tmp_path / "c.json")]) == 0
    text = capsys.readouterr().out
    assert "Ember compile-time profile: convnet" in text and "no kernel over the 1000 s LLVM budget" in text
    assert json.load(open(tmp_path / "c.json"))["model"] == "convnet"
