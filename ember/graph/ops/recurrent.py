"""The recurrence of an RNN, GRU or LSTM layer as one op.

``nn.recurrence(xw, h0, [c0,] rt, rb, cell=..., acts=..., clip=..., linear_before_reset=...,
reverse=...)`` runs one direction of one layer over the projected inputs ``xw`` (seq, batch,
gates*hidden; the input bias added): each step multiplies the state by the recurrence weights
``rt`` (hidden, gates*hidden), adds their bias ``rb`` (gates*hidden), and applies the gates
(ONNX's order and equations: LSTM input, output, forget, cell; GRU update, reset, hidden).
Its result is ``(y (seq, batch, hidden), last h (batch, hidden)[, last c])``.

``acts`` holds the cell's activations (ONNX's f, g[, h]), each a chain of elementwise ops
applied in turn: ``((op, attrs, constant), ...)`` -- ``("multiply", (), 2.0)`` multiplies by
2, ``("nn.leaky_relu", (("alpha", 0.1),), None)`` is a leaky ReLU -- so that the frontends'
unrolled steps and this op's kernel (a loop program written directly,
:mod:`.compute.recurrent`: the step after step no tensor computation expresses) compute the
same functions from one description. ``clip`` (0: none) bounds the gates' inputs.
"""
from __future__ import annotations

from ...errors import DTypeError, ShapeError
from ..types import TensorType, TupleType
from . import dims as D
from .registry import Pattern, attr, get_op, register_op, tensor

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
ACTS = {"RNN": 1, "GRU": 2, "LSTM": 3}


def check_activation(act) -> None:
    """ShapeError unless ``act`` is a chain of unary elementwise ops (see the module docstring)."""
    if not isinstance(act, tuple) or not act:
        raise ShapeError(f"nn.recurrence: an activation is a non-empty tuple of steps, got {act!r}")
    for step in act:
        if not (isinstance(step, tuple) and len(step) == 3 and isinstance(step[0], str) and isinstance(step[1], tuple)):
            raise ShapeError(f"nn.recurrence: an activation's step is (op, attrs, constant), got {step!r}")
        op, attrs, k = step
        d = get_op(op)
        if d.pattern not in (Pattern.ELEMWISE, Pattern.BROADCAST) or not isinstance(k, (type(None), float, int)) or isinstance(k, bool):
            raise ShapeError(f"nn.recurrence: {op!r} cannot be an activation's step (an elementwise op of the "
                             f"value, and of a number where one is given)")
        d.check_arity(1 if k is None else 2)
        d.check_attrs(dict(attrs))


def _infer_recurrence(args, attrs):
    cell = attrs["cell"]
    if cell not in GATES:
        raise ShapeError(f"nn.recurrence: cell must be one of {', '.join(GATES)}, got {cell!r}")
    lstm = cell == "LSTM"
    want = 5 if lstm else 4
    if len(args) != want:
        raise ShapeError(f"nn.recurrence: a {cell} takes {want} inputs (xw, h0{', c0' if lstm else ''}, rt, rb), "
                         f"got {len(args)}")
    names = ["xw", "h0"] + (["c0"] if lstm else []) + ["rt", "rb"]
    ts = {n: tensor(a, f"nn.recurrence's {n}") for n, a in zip(names, args)}
    for n, t in ts.items():
        if t.dtype != "float32":
            raise DTypeError(f"nn.recurrence: {n} must be float32, got {t}")
    xw, h0, rt, rb = ts["xw"], ts["h0"], ts["rt"], ts["rb"]
    if rt.ndim != 2 or not all(isinstance(d, int) for d in rt.shape):
        raise ShapeError(f"nn.recurrence: rt must be static (hidden, gates*hidden), got {rt}")
    hidden = rt.shape[0]
    gh = GATES[cell] * hidden
    if rt.shape[1] != gh or rb.shape != (gh,):
        raise ShapeError(f"nn.recurrence: a {cell} of hidden size {hidden} needs rt ({hidden}, {gh}) and rb ({gh},), "
                         f"got {rt} and {rb}")
    if xw.ndim != 3 or xw.shape[2] != gh:
        raise ShapeError(f"nn.recurrence: xw must be (seq, batch, {gh}), got {xw}")
    batch = xw.shape[1]
    for n in ["h0"] + (["c0"] if lstm else []):
        t = ts[n]
        if t.ndim != 2 or t.shape[1] != hidden:
            raise ShapeError(f"nn.recurrence: {n} must be (batch, {hidden}), got {t}")
        batch = D.assume_equal(batch, t.shape[0], f"nn.recurrence: xw and {n} have one batch")
    acts = attrs["acts"]
    if not isinstance(acts, tuple) or len(acts) != ACTS[cell]:
        raise ShapeError(f"nn.recurrence: a {cell} has {ACTS[cell]} activation(s), got {acts!r}")
    for a in acts:
        check_activation(a)
    state = TensorType((batch, hidden), "float32")
    return TupleType([TensorType((xw.shape[0], batch, hidden), "float32"), state] + ([state] if lstm else []))


register_op("nn.recurrence", infer=_infer_recurrence, pattern=Pattern.OPAQUE, num_args=(4, 5),
            attrs_schema={"cell": attr("str"), "acts": attr("any"), "clip": attr("float", 0.0),
                          "linear_before_reset": attr("bool", False), "reverse": attr("bool", False)},
            doc="one direction of an RNN/GRU/LSTM layer over projected inputs xw (seq, batch, gates*hidden): "
                "(y, last h[, last c]); see ember.graph.ops.recurrent")

__all__ = ["ACTS", "GATES", "check_activation"]
