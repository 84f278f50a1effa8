"""The static twin of a kernel over symbolic sizes: the same group compiled for its likely sizes.

A model exported with dynamic axes runs kernels over symbolic sizes, and those lose what a
static shape gives the compiler: index arithmetic folded to constants, partial blocks and
padding conditions decided at compile time, taps proved to read only padding. Measured at the
sizes they ran at, EfficientNet-B0 and RegNetY-400MF exported with a dynamic height and width
ran 1.15-1.2x their static exports' time. The shape they are run at most is the likely one
(:mod:`.likely`: the user's ``shape_hints``, else a batch of 1, 224x224 images, sequences of
128), so each such kernel also gets the group compiled with its symbols bound to their likely
values, and branches to it at run time when the sizes are those (TensorRT builds an
optimization profile's kernels for its "opt" shape the same way). Other sizes take the
symbolic kernel, so every size still runs. A tuning record of the static workload (``ember tune
--input-shape``) schedules the twin: a model tuned at one shape is tuned in its dynamic export
too.
"""
from __future__ import annotations

from typing import Optional

from ..errors import EmberError
from ..graph.ir import Function, Var
from ..graph.types import Dim, TensorType

__all__ = ["bound_dim", "specialize_group", "twin_condition"]


def bound_dim(d, values: dict):
    """Dimension ``d`` with its symbols at ``values``: an int, or None where one is missing."""
    from ..kernels.common import int_at

    return int_at(d.expr, values) if isinstance(d, Dim) else d


def specialize_group(fn: Function, values: dict, attrs: bool = False) -> Optional[Function]:
    """Fused group ``fn`` with the symbolic sizes of its parameters -- and with ``attrs`` of its
    ops' attributes too (a generic slice's bounds, a reshape's sizes: a tier-0 group bound to
    a call's sizes) -- bound to ``values`` (symbol name -> int) and its types inferred again;
    None where it has no symbolic parameter, a symbol has no value, or the group does not hold
    at those sizes."""
    from ..graph.infer import infer_types
    from ..graph.ir import Call
    from ..graph.visit import rewrite, substitute
    from .compile import _untyped

    def bind(v):
        if isinstance(v, Dim):
            d = bound_dim(v, values)
            if d is None:
                raise KeyError(v)
            return d
        return tuple(bind(x) for x in v) if isinstance(v, tuple) else v

    def bound_attrs(n):
        if not isinstance(n, Call) or not any(isinstance(v, (Dim, tuple)) for v in n.attrs.values()):
            return None
        attrs = {k: bind(v) for k, v in n.attrs.items()}
        return n.replace(attrs=attrs) if attrs != dict(n.attrs) else None

    mapping = {}
    for p in fn.params:
        t = p.type
        if not isinstance(t, TensorType) or t.is_static:
            continue
        shape = tuple(bound_dim(d, values) for d in t.shape)
        if any(d is None or d < 0 for d in shape):
            return None
        mapping[p] = Var(p.name, TensorType(shape, t.dtype))
    if not mapping:
        return None
    try:
        body = substitute(fn.body, mapping)
        body = rewrite(body, bound_attrs) if attrs else body
        out = infer_types(Function([mapping.get(p, p) for p in fn.params], _untyped(body)))
    except (EmberError, KeyError):
        return None
    t = out.ret_type
    types = t.fields if hasattr(t, "fields") else (t,)
    if not all(isinstance(x, TensorType) and x.is_static for x in types):
        return None
    return out


def twin_condition(values: dict):
    """The run-time test that the kernel's sizes are ``values``: ``n == 1 and h32 == 7 ...``."""
    from ..loop.expr import EQ, IntImm, Var as LoopVar, logical_and

    return logical_and(*(EQ(LoopVar(n, "int64"), IntImm(values[n], "int64")) for n in sorted(values)))
