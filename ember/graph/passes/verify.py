"""Graph well-formedness: what :class:`~.context.VerifyAfterPass` checks after every pass."""
from __future__ import annotations

from ...errors import ShapeError
from ..infer import call_type
from ..ir import Call, Module
from ..visit import free_vars, post_order


def verify(mod: Module) -> None:
    """Raise ``ShapeError`` if a function uses an unbound variable, or a call's recorded type is
    missing or differs from what its op's rule gives for its operands' recorded types."""
    globals_ = {name: fn for name, fn in mod.functions if name != "main"}
    for name, fn in mod.functions:
        unbound = [v.name for v in free_vars(fn)]
        if unbound:
            raise ShapeError(f"function {name} uses unbound variable(s) {', '.join(unbound)}")
        for n in post_order(fn):
            if isinstance(n, Call):
                want = call_type(n, globals_)
                if n.type != want:
                    raise ShapeError(f"in {name}: {n.op} records type {n.type}, but its operands give {want}")
        if fn.ret_type is not None and fn.body.type != fn.ret_type:
            raise ShapeError(f"function {name} declares result type {fn.ret_type} but its body has type {fn.body.type}")


__all__ = ["verify"]
