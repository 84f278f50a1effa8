"""A reference evaluator of loop-IR expressions over Python ints, from the IR's semantics."""
from __future__ import annotations


from ember.loop import (Add, And, Broadcast, Div, EQ, FloorDiv, FloorMod, GE, GT, IntImm, LE, LT, Let, Max, Min, Mod,
                        Mul, NE, Not, Or, Ramp, Select, Sub, Var)

CMPS = (LT, LE, GT, GE, EQ, NE)

# --- reference evaluator ---------------------------------------------------------------------

def _wrap(v: int, dtype: str) -> int:
    if dtype == "bool":
        return v
    bits = int("".join(c for c in dtype if c.isdigit()))
    v &= (1 << bits) - 1
    if not dtype.startswith("uint") and v >> (bits - 1):
        v -= 1 << bits
    return v


def _tdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


# Division by zero gives 0, as in numpy and the generated code.
_OPS = {
    Add: lambda a, b: a + b, Sub: lambda a, b: a - b, Mul: lambda a, b: a * b,
    FloorDiv: lambda a, b: a // b if b else 0, FloorMod: lambda a, b: a % b if b else 0,
    Div: lambda a, b: _tdiv(a, b) if b else 0, Mod: lambda a, b: a - b * _tdiv(a, b) if b else 0,
    Min: min, Max: max,
    LT: lambda a, b: a < b, LE: lambda a, b: a <= b, GT: lambda a, b: a > b, GE: lambda a, b: a >= b,
    EQ: lambda a, b: a == b, NE: lambda a, b: a != b,
    And: lambda a, b: a and b, Or: lambda a, b: a or b,
}


def ev(e, env):
    """Value of ``e`` (Python ints/bools; a tuple per lane for vectors)."""
    t = type(e)
    if t is IntImm:
        return bool(e.value) if e.type == "bool" else e.value
    if t is Var:
        return env[e]
    if t is Ramp:
        b, s = ev(e.base, env), ev(e.stride, env)
        return tuple(b + k * s for k in range(e.lanes))
    if t is Broadcast:
        return (ev(e.value, env),) * e.lanes
    if t is Not:
        a = ev(e.a, env)
        return tuple(not x for x in a) if isinstance(a, tuple) else not a
    if t is Select:
        c, a, b = ev(e.condition, env), ev(e.true_value, env), ev(e.false_value, env)
        if isinstance(c, tuple):
            return tuple(x if k else y for k, x, y in zip(c, a, b))
        return a if c else b
    if t is Let:
        return ev(e.body, {**env, e.var: ev(e.value, env)})
    if t in _OPS:
        a, b = ev(e.a, env), ev(e.b, env)
        f = _OPS[t]
        elem = e.a.dtype.split("x")[0] if "x" in e.a.dtype else e.a.dtype

        def one(x, y):
            r = f(x, y)
            return _wrap(r, elem) if isinstance(r, int) and not isinstance(r, bool) else r
        if isinstance(a, tuple):
            return tuple(one(x, y) for x, y in zip(a, b))
        return one(a, b)
    raise NotImplementedError(t.__name__)


