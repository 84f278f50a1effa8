"""The graph IR [Relay/Relax]: whole models as typed dataflow over operator calls.

- :mod:`.types` — ``TensorType(shape, dtype)`` with int or symbolic :class:`Dim` dimensions,
  ``TupleType``, ``FuncType``.
- :mod:`.attrs` — ``Attrs``, the frozen, normalized attribute mapping of a Call.
- :mod:`.ir` — immutable, interned nodes: ``Var``, ``Constant``, ``Call``, ``Tuple``,
  ``TupleGetItem``, ``Function``; ``Module`` maps global names to Functions.
- :mod:`.visit` — ``post_order``, ``walk``, ``rewrite``, ``substitute``, ``topo_calls``,
  ``free_vars``, ``use_counts``: each distinct node once, no recursion.
- :mod:`.printer` — ``astext``: the stable SSA text form (also ``str`` of any node).
- :mod:`.diff` — ``structural_diff`` / ``assert_structural_equal``: alpha-equivalence, and the
  path to the first difference.

>>> x = Var("x", TensorType(("batch", 4), "float32"))
>>> print(Module.from_expr(Call("nn.relu", [x])))
def main(%x: Tensor[(batch, 4), float32]):
    %0 = nn.relu(%x)
    return %0
"""
from .attrs import Attrs
from .diff import assert_structural_equal, structural_diff
from .ir import Call, Constant, Expr, Function, Module, Tuple, TupleGetItem, Var, const, merge_spans, source_span
from .printer import astext
from .types import Dim, FuncType, TensorType, TupleType, Type
from .visit import (children, count_nodes, free_vars, post_order, rewrite, substitute, topo_calls,
                    use_counts, walk)

__all__ = [
    "Attrs", "Call", "Constant", "Dim", "Expr", "FuncType", "Function", "Module", "TensorType",
    "Tuple", "TupleGetItem", "TupleType", "Type", "Var", "assert_structural_equal", "astext",
    "children", "const", "merge_spans", "source_span", "count_nodes", "free_vars", "post_order", "rewrite", "structural_diff",
    "substitute", "topo_calls", "use_counts", "walk",
]
