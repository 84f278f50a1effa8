"""ember.load checks an export before it trusts it (ember.runtime.verify).

Damage anywhere (the program, the kernel metadata, the weights, the code, a truncated or
extended file) is caught by the export's checksum trailer. Behind it, a file changed
consistently (resealed) is checked field by field: every slot, offset and call before use.
Each case must be a ModelError, never a crash or another exception.
"""
import json

import numpy as np
import pytest

import ember
from ember.errors import ModelError
from ember.graph import Call, Function, Module, Var
from ember.graph.infer import infer_types
from ember.graph.types import TensorType
from ember.runtime.executable import Executable
from ember.runtime.verify import SEAL_MAGIC, reseal, verify_metadata, verify_program
from ember.testing.fuzz import elf_regions


@pytest.fixture(scope="module")
def export_bytes(conv_net_exe, tmp_path_factory) -> bytes:
    path = conv_net_exe.export(str(tmp_path_factory.mktemp("verify") / "convnet.so"))
    with open(path, "rb") as f:
        return f.read()


def _json_region(data: bytes, key: bytes) -> tuple:
    regions = elf_regions(data)
    found = [v for k, v in regions.items() if k.startswith("json:") and key in data[v[0]:v[1]]]
    assert len(found) == 1, (key, regions)
    return found[0]


def region(data: bytes, name: str) -> tuple:
    if name == "program":
        return _json_region(data, b'"calls"')
    if name == "metadata":
        return _json_region(data, b'"kernels"')
    if name == "weights":
        return elf_regions(data)["weights"]
    return elf_regions(data)[".text"]


def load_bytes(tmp_path, data: bytes, name: str = "m.so"):
    path = tmp_path / name
    path.write_bytes(data)
    return ember.load(str(path))


def test_an_export_is_sealed_and_loads(export_bytes, tmp_path, conv_net_exe):
    assert export_bytes[-8:] == SEAL_MAGIC
    exe = load_bytes(tmp_path, export_bytes)
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)
    np.testing.assert_allclose(exe.run(x)[0], conv_net_exe.run(x)[0], rtol=1e-5, atol=1e-6)
    assert exe.memory_info.weights_mapped
    assert reseal(export_bytes) == export_bytes  # resealing an intact export changes nothing


@pytest.mark.parametrize("blob", ["program", "metadata", "weights", "code"])
def test_a_changed_byte_in_each_blob_is_a_model_error(export_bytes, tmp_path, blob):
    a, z = region(export_bytes, blob)
    assert z > a
    for at in (a, (a + z) // 2, z - 1):
        data = bytearray(export_bytes)
        data[at] ^= 0x41
        with pytest.raises(ModelError, match="corrupted"):
            load_bytes(tmp_path, bytes(data), f"{blob}-{at}.so")


@pytest.mark.parametrize("fraction", [0.0, 0.01, 0.3, 0.5, 0.9, 0.999])
def test_a_truncated_export_is_a_model_error(export_bytes, tmp_path, fraction):
    with pytest.raises(ModelError, match="truncated|too short|trailer"):
        load_bytes(tmp_path, export_bytes[:int(len(export_bytes) * fraction)])


def test_an_extended_or_unsealed_export_is_a_model_error(export_bytes, tmp_path):
    with pytest.raises(ModelError, match="extended|trailer"):
        load_bytes(tmp_path, export_bytes + b"\0" * 100, "ext.so")
    with pytest.raises(ModelError, match="no Ember export trailer"):
        load_bytes(tmp_path, export_bytes[:-48], "unsealed.so")


# -- behind the checksum: a consistent but malformed export ------------------------------------

def rewrite_json(data: bytes, blob: str, change) -> bytes:
    """``data`` with the program or metadata JSON changed by ``change(doc)`` (written back in its
    place, compactly) and resealed."""
    a, z = region(data, blob)
    doc = json.loads(data[a:z])
    change(doc)
    text = json.dumps(doc, separators=(",", ":")).encode()
    assert len(text) <= z - a
    return reseal(data[:a] + text.ljust(z - a) + data[z:])


def _first_arena_slot(p):
    return next(s for s in p["slots"] if s["kind"] == "arena")


def _overlap_output_and_input(p):
    # the first call that reads an arena slot and writes another: its output moved onto its input
    slots = p["slots"]
    for call in p["calls"]:
        arena = [a for a in call["args"] if slots[a]["kind"] == "arena"]
        if len(arena) >= 2:
            slots[arena[-1]]["offset"] = slots[arena[0]]["offset"]
            return
    raise AssertionError("no call reads and writes the arena")


PROGRAM_DAMAGE = {
    "a call's argument names a slot past the table": (
        lambda p: p["calls"][0]["args"].__setitem__(0, len(p["slots"]) + 5), "argument 0 must be an integer"),
    "an arena slot runs past the arena": (
        lambda p: _first_arena_slot(p).__setitem__("offset", p["arena_bytes"]), "runs past the arena"),
    "a constant runs past the weights": (
        lambda p: p["constants"][-1].__setitem__("offset", p["constants"][-1]["offset"] + (1 << 20)),
        "runs past the .* bytes of weights"),
    "a constant's offset is misaligned": (
        lambda p: p["constants"][-1].__setitem__("offset", p["constants"][-1]["offset"] + 4), "aligned"),
    "a call drops an argument": (lambda p: p["calls"][0]["args"].pop(), r"passes \d argument\(s\) to"),
    "a call names a kernel the library lacks": (
        lambda p: p["calls"][0].__setitem__("kernel", "no_such_kernel"), "which the library does not have"),
    "a slot's dtype is not a dtype": (lambda p: p["slots"][0].__setitem__("dtype", "float33"), "dtype 'float33'"),
    "a negative dimension": (lambda p: p["slots"][0]["shape"].__setitem__(0, -1), "shape entry 0"),
    "a call writes over its own input": (_overlap_output_and_input, "writes argument .* over the memory of argument"),
    "the output slot is a constant": (
        lambda p: p["outputs"][0].__setitem__("slot", next(k for k, s in enumerate(p["slots"]) if s["kind"] == "const")),
        "output #0"),
    "an arena slot becomes an output slot of no output": (  # found by the fuzzer: a run had no array for it
        lambda p: _first_arena_slot(p).__setitem__("kind", "output"), "output slots and the uncopied outputs"),
    "a bind of a symbol the program does not have": (
        lambda p: p.setdefault("binds", []).append({"after": 0, "symbol": "?n", "slot": 0, "index": 0}),
        "not a symbol of the program"),
    "an arena slot's lifetime cleared": (  # fuzzer: an IndexError in the runtime's phases
        lambda p: _first_arena_slot(p).__setitem__("live", []), "lifetime must be"),
    "an output without its copy flag": (lambda p: p["outputs"][0].pop("copy"), "has no 'copy'"),  # fuzzer: KeyError
    "the arena size is huge": (lambda p: p.__setitem__("arena_bytes", 1 << 60), "arena_bytes"),
    "the calls are not a list": (lambda p: p.__setitem__("calls", {"x": 1}), "calls must be a list"),
}


@pytest.mark.parametrize("what", sorted(PROGRAM_DAMAGE))
def test_a_malformed_program_behind_a_good_checksum_is_a_model_error(export_bytes, tmp_path, what):
    change, message = PROGRAM_DAMAGE[what]
    with pytest.raises(ModelError, match=message):
        load_bytes(tmp_path, rewrite_json(export_bytes, "program", change))


def test_a_program_that_is_not_json_is_a_model_error(export_bytes, tmp_path):
    a, z = region(export_bytes, "program")
    data = reseal(export_bytes[:a] + b"{not json" + export_bytes[a + 9:])
    with pytest.raises(ModelError, match="program is not JSON"):
        load_bytes(tmp_path, data)


METADATA_DAMAGE = {
    "a parameter's dtype": (lambda m: m["kernels"][0]["params"][0].__setitem__("dtype", "float33"), "float33"),
    "a kernel absent from the library": (
        lambda m: m["kernels"][0].__setitem__("name", m["kernels"][0]["name"][:-1] + "Q"), "not in the library"),
    # (the metadata is compact JSON: a change must not make it longer)
    "a parameter's kind": (lambda m: m["kernels"][0]["params"][0].__setitem__("kind", "pointr"), "kind 'pointr'"),
    "an alignment that is not a power of two": (
        lambda m: m["kernels"][0]["params"][0].__setitem__("align", 3), "power of two"),
    "a shape that is not dimensions": (
        lambda m: m["kernels"][0]["params"][0].__setitem__("shape", [{"a": 1}]), "not a dimension"),
}


@pytest.mark.parametrize("what", sorted(METADATA_DAMAGE))
def test_malformed_kernel_metadata_behind_a_good_checksum_is_a_model_error(export_bytes, tmp_path, what):
    change, message = METADATA_DAMAGE[what]
    with pytest.raises(ModelError, match=message):
        load_bytes(tmp_path, rewrite_json(export_bytes, "metadata", change))


def test_damaged_weights_behind_a_good_checksum_load_and_run(export_bytes, tmp_path):
    # weights are data: changed consistently, they load and give other numbers, never a crash
    a, z = region(export_bytes, "weights")
    data = bytearray(export_bytes)
    data[a:z] = np.full((z - a) // 4, np.nan, np.float32).tobytes()
    exe = load_bytes(tmp_path, reseal(bytes(data)))
    y, = exe.run(np.ones((1, 3, 16, 16), np.float32))
    assert np.isnan(y).all()


# -- the same checks guard every compiled program -----------------------------------------------

def test_the_compiler_output_passes_and_a_damaged_copy_fails(conv_net_exe):
    exe = conv_net_exe
    verify_program(exe.program, exe.module, constants=exe.constants)
    verify_metadata(exe.module.metadata, exe.module.path)
    prog = json.loads(json.dumps(exe.program))
    prog["calls"][-1]["args"][0] = prog["calls"][-1]["args"][1]
    with pytest.raises(ModelError, match=f"call {len(prog['calls']) - 1} "):  # (the last; how many, the CPU's layout decides)
        Executable(exe.module, prog, exe.constants)
    shrunk = [c[:1] for c in exe.constants]
    with pytest.raises(ModelError, match="but that constant is"):
        Executable(exe.module, exe.program, shrunk)


def test_a_part_of_a_value_must_lie_inside_it():
    """A concat's parts are views at byte offsets of its bytes: an offset that puts a part past
    its base's end, or a part of a constant, is a ModelError."""
    x = Var("x", TensorType((1, 2, 3), "float32"))
    a = Call("nn.softmax", [x], {"axis": -1})
    body = Call("nn.softmax", [Call("concat", [a, Call("nn.softmax", [a], {"axis": 1})], {"axis": 1})], {"axis": 1})
    exe = ember.compile(infer_types(Module({"main": Function([x], body)})))
    verify_program(exe.program, exe.module, constants=exe.constants)
    k = next(k for k, s in enumerate(exe.program["slots"]) if s["kind"] == "view" and s.get("offset"))
    prog = json.loads(json.dumps(exe.program))
    prog["slots"][k]["offset"] += 4
    with pytest.raises(ModelError, match="runs past slot"):
        verify_program(prog, exe.module, constants=exe.constants)


# -- what the export needs of the host -------------------------------------------------------------

def _with_manifest(data: bytes, manifest: dict) -> bytes:
    """``data`` (a sealed export) with another manifest, sealed again."""
    return reseal(data, manifest)


def test_the_manifest_records_the_targets_requirements(export_bytes, tmp_path):
    from ember.runtime.verify import check_seal

    path = tmp_path / "m.so"
    path.write_bytes(export_bytes)
    req = check_seal(str(path))["requires"]
    assert req["arch"] in ("x86_64", "aarch64") and req["libraries"] == ["libgomp.so.1"]
    assert all(isinstance(f, str) for f in req["features"])


def test_a_cpu_feature_the_host_lacks_is_a_target_error_naming_it(export_bytes, tmp_path):
    from ember.errors import TargetError
    from ember.runtime.verify import check_seal

    path = tmp_path / "m.so"
    path.write_bytes(export_bytes)
    req = dict(check_seal(str(path))["requires"])
    req["features"] = req["features"] + ["amx-fp42"]  # an extension no CPU has
    req["cpu"] = "future-cpu"
    with pytest.raises(TargetError, match=r"future-cpu and uses amx-fp42, which this CPU lacks \(it has: "):
        load_bytes(tmp_path, _with_manifest(export_bytes, {"requires": req}), "future.so")
    req["features"], req["arch"] = [], "riscv64"
    with pytest.raises(TargetError, match="compiled for riscv64 .* this host is"):
        load_bytes(tmp_path, _with_manifest(export_bytes, {"requires": req}), "riscv.so")


def test_the_requirement_check_itself():
    from ember.errors import TargetError
    from ember.runtime.requirements import check_requirements, requirements_of
    from ember.target import Target

    avx512 = Target("x86_64-unknown-linux-gnu", "skylake-avx512", "+avx2,+fma,+avx512f,+avx512bw,+cx16", 512)
    req = requirements_of(avx512)
    assert req["features"] == ["avx2", "avx512bw", "avx512f", "fma"]  # only ISA extensions
    avx2_host = {"avx", "avx2", "fma", "f16c", "sse4_1"}
    with pytest.raises(TargetError, match="uses avx512bw, avx512f, which this CPU lacks .*it has: avx, avx2, f16c, fma"):
        check_requirements(req, "m.so", flags=avx2_host, arch="x86_64")
    check_requirements(req, "m.so", flags=avx2_host | {"avx512f", "avx512bw"}, arch="x86_64")


def test_a_deep_dimension_passes_and_a_deeper_one_is_a_model_error():
    """A dimension nests as deep as Swin-V2's padded planes with a dynamic height and width
    (20-odd levels); past ``shapes.MAX_DEPTH`` it is refused, not recursed into."""
    from ember.runtime import shapes

    def nest(depth):
        d = "h"
        for _ in range(depth):
            d = ["FloorDiv", ["Add", d, 1], 2]
        return d
    meta = lambda d: {"kernels": [{"name": "k", "params": [{"kind": "buffer", "name": "p", "dtype": "float32",  # noqa: E731
                                                             "shape": [d]}]}]}
    verify_metadata(meta(nest(12)), "lib.so")  # 24 levels
    with pytest.raises(ModelError, match="nests too deep"):
        verify_metadata(meta(nest(shapes.MAX_DEPTH)), "lib.so")
