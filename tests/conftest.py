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
# import time so that even module-level builds in test files use it. pytest-xdist's workers
# inherit the controller's environment: they share the directory its conftest made (the cache
# is safe across processes), so a kernel one file compiles serves the others as in one process.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if _WORKER and os.environ.get("EMBER_TEST_CACHE_DIR"):
    _CACHE = os.environ["EMBER_TEST_CACHE_DIR"]
else:
    _CACHE = tempfile.mkdtemp(prefix="ember-test-cache-")
    os.environ["EMBER_TEST_CACHE_DIR"] = _CACHE
os.environ["EMBER_CACHE_DIR"] = _CACHE


@pytest.fixture(scope="session")
def ember_cache_dir() -> str:
    """The compile-cache directory of this test session."""
    return _CACHE


def pytest_unconfigure(config):
    import shutil

    if _WORKER is None:  # the process that made it
        shutil.rmtree(_CACHE, ignore_errors=True)


# -- the suite on every core (pytest-xdist; pyproject's addopts) -----------------------------

# Workers for ``-n auto``: one a core, at most four (each imports torch and builds models: a
# worker holds 1-2 GB at its peak).
MOST_WORKERS = 4


def pytest_xdist_auto_num_workers(config) -> int:
    return max(1, min(MOST_WORKERS, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))


def pytest_collection_modifyitems(config, items):
    """Files that hold slow tests first: whole files go to one worker each (``--dist loadfile``,
    which keeps each module's fixtures built once), so the longest start first and the rest
    fill the other workers around them rather than one of them running alone at the end."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow)  # stable: the files' own order otherwise


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
