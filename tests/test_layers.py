"""Each layer imports only the layers below it, at the top of a module or inside a function
(a function-level import is still a dependency: it only hides an import circle).

The order, lowest first, is the package map of docs/architecture.md. A module that needs
something from a layer above takes it as an argument (the constant folder's evaluator in its
PassContext, a compile job's maker by reference, the Executable class ``ember.load`` builds).
"""
from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent / "ember"

# (module prefix, layer): the longest matching prefix decides
LAYERS = [
    ("ember.errors", 0), ("ember.config", 0), ("ember.version", 0), ("ember.target", 0), ("ember.options", 0),
    ("ember.cache_size", 0), ("ember.extras", 0),
    ("ember.loop", 1),
    ("ember.runtime", 2),
    ("ember.codegen", 3),
    ("ember.kernels", 4),
    ("ember.driver", 5),
    ("ember.profile", 6),
    ("ember.graph", 7),
    ("ember.frontend", 8),  # importers: a model file -> graph IR
    ("ember.offload", 8),  # backends that write a fused group's kernel in C
    ("ember.compiler", 9),
    ("ember.tune", 10),
    # front doors, which compile: the onnx Backend and its conformance runner, from_torch
    ("ember.frontend.onnx.backend", 11), ("ember.frontend.onnx.conformance", 11), ("ember.frontend.torch", 11),
    ("ember.quantizer", 11),  # calibrates by compiling the model
    ("ember", 12),  # the package's front door (ember.compile, ember.load, ...)
    # what is built on the front door: the command line, the benchmarks' and tests' helpers
    ("ember.testing", 13), ("ember.bench", 13), ("ember.cli", 13), ("ember.cli_model", 13),
    ("ember.cli_profile", 13), ("ember.cli_tune", 13), ("ember.cli_cache", 13), ("ember.cli_torch", 13),
    ("ember.cli_quantize", 13),
]


def layer(module: str) -> int:
    best = None
    for prefix, rank in LAYERS:
        if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, rank)
    assert best is not None, module
    return best[1]


def module_name(path: pathlib.Path, root: pathlib.Path = ROOT) -> str:
    parts = ("ember",) + path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: pathlib.Path, root: pathlib.Path = ROOT):
    """(line, imported module) of every import of an ember module in ``path``."""
    name = module_name(path, root)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target == "ember" or target.startswith("ember."):
                # ``from . import x`` names submodules: each is a dependency
                subs = [f"{target}.{a.name}" for a in node.names]
                for t in subs if not node.module else [target]:
                    yield node.lineno, t
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("ember"):
                    yield node.lineno, a.name


def violations(root: pathlib.Path = ROOT) -> list:
    """The upward imports of the package at ``root`` (a copy's, for the checker's own test)."""
    out = []
    for path in sorted(root.rglob("*.py")):
        mine = module_name(path, root)
        for line, target in imports(path, root):
            if layer(target) > layer(mine):
                out.append(f"{path.relative_to(root.parent)}:{line}: {mine} (layer {layer(mine)}) imports "
                           f"{target} (layer {layer(target)})")
    return out


def test_each_layer_imports_only_layers_below():
    found = violations()
    assert not found, "imports of a layer above:\n" + "\n".join(found)


def test_the_checker_sees_function_level_imports(tmp_path):
    # (the check itself can fail: a function-level upward import in a lower layer is found). The
    # probe goes in a package of its own: written into ember's tree, it changed the source digest
    # that keys every cached library while a test on another worker compiled
    src = "def f():\n    from ..compiler.compile import compile_model\n"
    root = tmp_path / "ember"
    (root / "graph").mkdir(parents=True)
    (root / "graph" / "_layer_probe.py").write_text(src)
    assert any("_layer_probe" in v and "ember.compiler.compile" in v for v in violations(root))
