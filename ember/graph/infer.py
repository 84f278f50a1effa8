"""Type inference: fill in the type of every Call from its operands' types and its op's rule.

    >>> from ember.graph import Call, Module, TensorType, Var
    >>> x = Var("x", TensorType(("n", 4), "float32"))
    >>> mod = infer_types(Module.from_expr(Call("nn.relu", [Call("exp", [x])])))
    >>> print(mod)
    def main(%x: Tensor[(n, 4), float32]) -> Tensor[(n, 4), float32]:
        %0 = exp(%x) : Tensor[(n, 4), float32]
        %1 = nn.relu(%0) : Tensor[(n, 4), float32]
        return %1

Types come from :func:`ember.graph.ops.infer_type`, so an error names the op and what is
wrong with its inputs. A Call whose recorded type disagrees with its rule gets the rule's type
(the rule is the source of truth: a pass may rebuild Calls without updating types). A
Function's ``ret_type`` is filled in from its body; a declared ``ret_type`` that disagrees is a
ShapeError naming both types.
"""
from __future__ import annotations

from typing import Optional, TypeVar, Union

from ..errors import ShapeError
from .ir import Call, Expr, Function, Module, TupleGetItem, Var, source_span
from .ops import infer_type
from .visit import rewrite

Root = TypeVar("Root", bound=Union[Expr, Module])


def call_type(n: Call, globals_: dict):
    """A call to a module function (a fused group) has that function's result type, once its
    arguments match the parameters; any other call follows its op's rule."""
    fn = globals_.get(n.op)
    if fn is None:
        return infer_type(n.op, [a.type for a in n.args], n.attrs)
    want = [p.type for p in fn.params]
    got = [a.type for a in n.args]
    if want != got:
        raise ShapeError(f"call of {n.op}: arguments {', '.join(map(str, got))} do not match its "
                         f"parameters {', '.join(map(str, want))}")
    return fn.ret_type


def _fill(n: Expr, globals_: dict) -> Optional[Expr]:
    if isinstance(n, Call):
        with source_span(*n.span):  # (what the rule assumes of sizes names the model's node)
            t = call_type(n, globals_)
        return None if t == n.type else n.replace(type=t)
    if isinstance(n, Var) and n.type is None:
        raise ShapeError(f"variable %{n.name} has no type; type inference starts from typed parameters")
    if isinstance(n, TupleGetItem) and n.type is None and n.tuple.type is not None:
        raise ShapeError(f"tuple index {n.index} is out of range for {n.tuple.type}")
    if isinstance(n, Function):
        t = n.body.type
        if n.ret_type is None:
            return n.replace(ret_type=t)
        if t != n.ret_type:
            raise ShapeError(f"the function declares result type {n.ret_type} but its body has type {t}")
    return None


def infer_types(root: Root) -> Root:
    """``root`` (a Module, Function or expression) with every Call's ``type`` filled in.

    Untouched when every type is already right (the same object comes back).
    """
    globals_ = dict(root.functions) if isinstance(root, Module) else {}
    globals_.pop("main", None)
    return rewrite(root, lambda n: _fill(n, globals_))


__all__ = ["call_type", "infer_types"]
