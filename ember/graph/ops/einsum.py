"""``einsum``: Einstein summation with numpy's semantics (explicit or implicit output, an
ellipsis for broadcast leading dims); :func:`einsum_terms` parses an equation for the shape rule
here and the compute (``ember.graph.ops.compute.index``)."""
from __future__ import annotations

from ...errors import ShapeError
from ..types import TensorType
from . import dims as D
from .registry import Pattern, attr, register_op, same_dtype, tensor


def einsum_terms(equation: str, ranks: list) -> tuple:
    """The input terms (prefix letters, has ellipsis, suffix letters, ellipsis rank) and output."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise ShapeError(f"equation {equation!r} has {len(terms)} input terms for {len(ranks)} inputs")
    out = []
    for t, r in zip(terms, ranks):
        pre, ell, post = t.partition("...")
        if "." in pre + post or not (pre + post).isalpha() and pre + post:
            raise ShapeError(f"equation {equation!r}: bad term {t!r}")
        nell = r - len(pre) - len(post)
        if nell < 0 or (not ell and nell):
            raise ShapeError(f"equation {equation!r}: term {t!r} does not match an input of rank {r}")
        out.append((pre, bool(ell), post, nell))
    if not arrow:  # implicit output: the ellipsis, then the letters used once, sorted
        letters = "".join(p + q for p, _, q, _ in out)
        rhs = ("..." if any(e for _, e, _, _ in out) else "") + "".join(
            sorted(c for c in set(letters) if letters.count(c) == 1))
    return out, rhs


def _infer_einsum(args, attrs):
    ts = [tensor(a, f"operand {i}") for i, a in enumerate(args)]
    dtype = same_dtype(ts, "the operands")
    terms, rhs = einsum_terms(attrs["equation"], [t.ndim for t in ts])
    sizes: dict = {}
    ell_shapes = []
    for t, (pre, ell, post, nell) in zip(ts, terms):
        ell_shapes.append(t.shape[len(pre):len(pre) + nell])
        labeled = list(zip(pre, t.shape[:len(pre)])) + list(zip(post, t.shape[len(pre) + nell:]))
        for c, d in labeled:
            old = sizes.setdefault(c, d)
            if old != d:
                if isinstance(old, int) and isinstance(d, int):
                    raise ShapeError(f"label {c!r} has sizes {old} and {d} in {attrs['equation']!r}")
                if isinstance(d, int):
                    sizes[c] = d
    ell_shape = D.broadcast_shapes(*ell_shapes) if ell_shapes else ()
    pre, ell, post = rhs.partition("...")
    for c in pre + post:
        if c not in sizes:
            raise ShapeError(f"output label {c!r} of {attrs['equation']!r} is in no input")
    shape = tuple(sizes[c] for c in pre) + (ell_shape if ell else ()) + tuple(sizes[c] for c in post)
    return TensorType(shape, dtype)


register_op("einsum", infer=_infer_einsum, pattern=Pattern.OPAQUE, num_args=(1, None),
            attrs_schema={"equation": attr("str")}, doc="Einstein summation (numpy.einsum semantics)")
