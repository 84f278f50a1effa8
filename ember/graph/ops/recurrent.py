"""The recurrence of an RNN, GRU or LSTM layer as one op.

``nn.recurrence(xw, h0, [c0,] rt, rb, [lengths], cell=..., acts=..., clip=...,
linear_before_reset=..., direction=...)`` is ONNX's RNN/GRU/LSTM after its input projection:
``xw`` (seq, batch, dirs * gates*hidden) holds every step's projected input, the input bias
added, direction after direction; each step multiplies the state by the recurrence weights
``rt`` (dirs, hidden, gates*hidden) -- or the same in panels of ``width`` columns, (dirs,
gates*hidden / width, hidden, width), each panel's rows one after the other (a width that
divides hidden) --, adds their bias ``rb`` (dirs, gates*hidden), and applies
the gates (ONNX's order and equations: LSTM input, output, forget, cell; GRU update, reset,
hidden). ``direction``: forward, reverse or bidirectional (dirs 2, the second reversed).
``h0`` and ``c0`` are (dirs, batch, hidden); the optional ``lengths`` (batch,) freeze a row's
state past its length and zero its outputs there (forward layers). The result is ONNX's:
``(y (seq, dirs, batch, hidden), last h (dirs, batch, hidden)[, last c])``.

``acts`` holds the activations (ONNX's f, g[, h] for each direction in turn), each a chain of
elementwise ops applied in turn: ``((op, attrs, constant), ...)`` -- ``("multiply", (), 2.0)``
multiplies by 2, ``("nn.leaky_relu", (("alpha", 0.1),), None)`` is a leaky ReLU -- so that the
frontends' unrolled steps and this op's kernel (a loop program written directly,
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
DIRECTIONS = ("forward", "reverse", "bidirectional")


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
    cell, direction = attrs["cell"], attrs["direction"]
    if cell not in GATES:
        raise ShapeError(f"nn.recurrence: cell must be one of {', '.join(GATES)}, got {cell!r}")
    if direction not in DIRECTIONS:
        raise ShapeError(f"nn.recurrence: direction must be one of {', '.join(DIRECTIONS)}, got {direction!r}")
    lstm = cell == "LSTM"
    names = ["xw", "h0"] + (["c0"] if lstm else []) + ["rt", "rb"]
    if len(args) not in (len(names), len(names) + 1):
        raise ShapeError(f"nn.recurrence: a {cell} takes {len(names)} inputs ({', '.join(names)}) and its rows' "
                         f"lengths, optionally; got {len(args)}")
    ts = {n: tensor(a, f"nn.recurrence's {n}") for n, a in zip(names, args)}
    for n, t in ts.items():
        if t.dtype != "float32":
            raise DTypeError(f"nn.recurrence: {n} must be float32, got {t}")
    dirs = 2 if direction == "bidirectional" else 1
    xw, rt, rb = ts["xw"], ts["rt"], ts["rb"]
    if rt.ndim not in (3, 4) or not all(isinstance(d, int) for d in rt.shape) or rt.shape[0] != dirs:
        raise ShapeError(f"nn.recurrence: rt must be static ({dirs}, hidden, gates*hidden), or in panels ({dirs}, "
                         f"gates*hidden / width, hidden, width), got {rt}")
    hidden = rt.shape[-2] if rt.ndim == 4 else rt.shape[1]
    gh = GATES[cell] * hidden
    if (rt.shape[2] if rt.ndim == 3 else rt.shape[1] * rt.shape[3]) != gh or rb.shape != (dirs, gh) \
            or rt.ndim == 4 and hidden % rt.shape[3]:
        raise ShapeError(f"nn.recurrence: a {direction} {cell} of hidden size {hidden} needs rt ({dirs}, {hidden}, "
                         f"{gh}) and rb ({dirs}, {gh}), got {rt} and {rb}")
    if xw.ndim != 3 or xw.shape[2] != dirs * gh:
        raise ShapeError(f"nn.recurrence: xw must be (seq, batch, {dirs * gh}), got {xw}")
    batch = xw.shape[1]
    for n in ["h0"] + (["c0"] if lstm else []):
        t = ts[n]
        if t.ndim != 3 or t.shape[0] != dirs or t.shape[2] != hidden:
            raise ShapeError(f"nn.recurrence: {n} must be ({dirs}, batch, {hidden}), got {t}")
        batch = D.assume_equal(batch, t.shape[1], f"nn.recurrence: xw and {n} have one batch")
    if len(args) > len(names):
        lens = tensor(args[-1], "nn.recurrence's lengths")
        if lens.ndim != 1 or lens.dtype not in ("int32", "int64") or direction != "forward":
            raise ShapeError(f"nn.recurrence: the rows' lengths are int32 or int64 (batch,), of a forward layer; "
                             f"got {lens} for a {direction} one")
        batch = D.assume_equal(batch, lens.shape[0], "nn.recurrence: xw and the lengths have one batch")
    acts = attrs["acts"]
    if not isinstance(acts, tuple) or len(acts) != ACTS[cell] * dirs:
        raise ShapeError(f"nn.recurrence: a {direction} {cell} has {ACTS[cell] * dirs} activation(s), got {acts!r}")
    for a in acts:
        check_activation(a)
    state = TensorType((dirs, batch, hidden), "float32")
    return TupleType([TensorType((xw.shape[0], dirs, batch, hidden), "float32"), state] + ([state] if lstm else []))


register_op("nn.recurrence", infer=_infer_recurrence, pattern=Pattern.OPAQUE, num_args=(4, 6),
            attrs_schema={"cell": attr("str"), "acts": attr("any"), "clip": attr("float", 0.0),
                          "linear_before_reset": attr("bool", False), "direction": attr("str", "forward")},
            doc="an RNN/GRU/LSTM layer over projected inputs xw (seq, batch, dirs*gates*hidden): (y (seq, dirs, "
                "batch, hidden), last h[, last c]); see ember.graph.ops.recurrent")

__all__ = ["ACTS", "DIRECTIONS", "GATES", "check_activation"]
