"""What is known at one point of a program: variable ranges and facts, plus per-point caches."""
from __future__ import annotations

from ..expr import IntImm


class Ctx:
    """Knowledge at a program point. Immutable in effect: new knowledge makes a new context.

    ``sym``: var -> inclusive (lo, hi) expressions (loop ranges, user ranges).
    ``civ``: var -> constant inclusive (lo, hi), ints or +-inf; may be tighter than ``sym``
    (conditions of enclosing ifs narrow it).
    ``facts``: int64 polynomials ``p`` known to satisfy ``p <= 0``.
    ``symbolic``: whether proofs may substitute symbolic ranges (off while computing such
    bounds, which keeps the recursion finite).
    """

    __slots__ = ("sym", "civ", "facts", "symbolic", "has_sym", "memo", "ivmemo", "lanes", "civ_ctx")

    def __init__(self, sym: dict, civ: dict, facts: tuple = (), symbolic: bool = True):
        self.sym = sym
        self.civ = civ
        self.facts = facts
        self.symbolic = symbolic
        self.has_sym = any(not (type(lo) is IntImm and type(hi) is IntImm) for lo, hi in sym.values())
        self.memo: dict = {}  # expr -> simplified expr
        self.ivmemo: dict = {}  # expr -> constant interval
        self.lanes: dict = {}  # lane count -> context with LANE bound
        self.civ_ctx = None  # the same constant ranges, without substitution (BoundMixin.facts_only)
