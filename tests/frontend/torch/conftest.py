"""The PyTorch frontend tests (torch is in the `test` extra).

This suite's ``tests/profile`` package and the standard library's ``profile`` module share a
name, and pytest puts ``tests/`` first on ``sys.path``: torch's Dynamo (which ``torch.export``
loads) runs ``import cProfile``, which reads ``profile.run`` and friends from whichever
``profile`` was imported. The package gets the standard module's names here, so both work.
"""
import importlib.util
import os
import sysconfig


def _give_profile_package_the_stdlib_names() -> None:
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
