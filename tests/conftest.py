"""Shared pytest setup."""
import importlib.util
import os
import sysconfig
import tempfile

import pytest


def _give_profile_package_the_stdlib_names() -> None:
    """This suite's ``tests/profile`` package and the standard library's ``profile`` module
    share a name, and pytest puts ``tests/`` first on ``sys.path``: torch's Dynamo (which
    ``torch.export`` and torchvision load) runs ``import cProfile``, which reads ``profile.run``
    and friends from whichever ``profile`` was imported. The package gets the standard
    module's names, so both work wherever a test imports torch."""
    import profile

    if hasattr(profile, "run"):  # the standard module itself
        return
    path = os.path.join(sysconfig.get_paths()["stdlib"], "profile.py")
    spec = importlib.util.spec_from_file_location("_stdlib_profile", path)
    std = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(std)
    for name in ("run", "runctx", "Profile", "_Utils", "main"):
        setattr(profile, name, getattr(std, name))


_give_profile_package_the_stdlib_names()

# Compiled kernels go to a private cache for the test session, never to ~/.cache/ember. Set at
# import time so that even module-level builds in test files use it.
_CACHE = tempfile.mkdtemp(prefix="ember-test-cache-")
os.environ["EMBER_CACHE_DIR"] = _CACHE


@pytest.fixture(scope="session")
def ember_cache_dir() -> str:
    """The compile-cache directory of this test session."""
    return _CACHE


def pytest_unconfigure(config):
    import shutil

    shutil.rmtree(_CACHE, ignore_errors=True)


# -- a small conv network as an ONNX file with named nodes (Conv+BN+Relu, a pool, a Gemm) --------


def conv_net(path: str) -> str:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(a.astype(np.float32), n) for n, a in [
        ("w", rng.standard_normal((8, 3, 3, 3))), ("scale", rng.random(8) + 0.5), ("bias", rng.standard_normal(8)),
        ("mean", rng.standard_normal(8)), ("var", rng.random(8) + 0.5), ("fc", rng.standard_normal((10, 8)))]]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="Conv_0", pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["b"],
                              name="BatchNormalization_1"),
             helper.make_node("Relu", ["b"], ["r"], name="Relu_2"),
             helper.make_node("GlobalAveragePool", ["r"], ["p"], name="GlobalAveragePool_3"),
             helper.make_node("Flatten", ["p"], ["f"], name="Flatten_4"),
             helper.make_node("Gemm", ["f", "fc"], ["y"], name="Gemm_5", transB=1)]
    g = helper.make_graph(nodes, "convnet", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.fixture(scope="session")
def conv_net_path(tmp_path_factory) -> str:
    return conv_net(str(tmp_path_factory.mktemp("profile") / "convnet.onnx"))


@pytest.fixture(scope="session")
def conv_net_exe(conv_net_path):
    import ember

    # (wait=True: its kernels at tier 1 before any test uses it -- a profile test timed tier-0
    # calls while the background compile held both cores of a CI machine)
    return ember.compile(conv_net_path, name="convnet", wait=True)
