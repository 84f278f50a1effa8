"""The digest of Ember's sources that keys every cache: the compiler's files are in it, the
benchmarks' and the command line's are not (they make nothing a cache keeps)."""
import os
import shutil

from ember import version


def _digest_of(root: str) -> str:
    """:func:`version.source_digest` of a copy of the package at ``root``."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_version_copy", os.path.join(root, "version.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.source_digest()


def test_the_compilers_sources_key_the_caches_and_the_benchmarks_do_not(tmp_path):
    pkg = os.path.dirname(version.__file__)
    root = str(tmp_path / "ember")
    shutil.copytree(pkg, root, ignore=shutil.ignore_patterns("__pycache__"))
    base = _digest_of(root)
    assert base == version.source_digest()
    for rel in ("bench/zoo.py", "cli.py", "cli_model.py"):
        with open(os.path.join(root, rel), "a") as f:
            f.write("\n# an edit\n")
        assert _digest_of(root) == base, rel
    for rel in ("compiler/compile.py", "graph/passes/block_layout.py", "options.py"):
        with open(os.path.join(root, rel), "a") as f:
            f.write("\n# an edit\n")
        changed = _digest_of(root)
        assert changed != base, rel
        base = changed
