"""An offload backend whose kernels fail, as a library refusing its primitive does: the tests'
way to see what a user meets then. It registers itself on import, as any backend's module
does, and a compile worker imports it by this name to make its kernels."""
from __future__ import annotations

from ..offload import Backend, ExternalSource, register_backend
from ..offload.reference import _matches


def _source(fn, func, name: str) -> ExternalSource:
    return ExternalSource(f"#include <stdint.h>\nint32_t {name}() {{ return 1; }}\n")


FAILING = register_backend(Backend("failing", _matches, _source, doc="kernels that fail (tests)"))
