"""Graph well-formedness: what :class:`~.context.VerifyAfterPass` checks after every pass."""
from __future__ import annotations

from ...errors import ShapeError
from ..infer import infer_types
from ..ir import Call, Module
from ..visit import free_vars, post_order


def verify(mod: Module) -> None:
    """Raise ``ShapeError`` if a function uses an unbound variable, a call names no op or
    module function, or a recorded type disagrees with type inference."""
    for name, fn in mod.functions:
        unbound = [v.name for v in free_vars(fn)]
        if unbound:
            raise ShapeError(f"function {name} uses unbound variable(s) {', '.join(unbound)}")
    fixed = infer_types(mod)
    if fixed is mod:
        return
    have = {id(n): n for n in post_order(mod)}
    for n in post_order(fixed):
        if isinstance(n, Call) and id(n) not in have:
            # the first call whose type had to change (its operands were already right)
            raise ShapeError(f"{n.op} records a type that type inference does not give: {n.type}")
    raise ShapeError("a function's declared result type disagrees with its body")


__all__ = ["verify"]
