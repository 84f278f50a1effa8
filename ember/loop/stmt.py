"""Statements, buffers and functions of the loop IR."""
from __future__ import annotations

from typing import Optional

from . import dtype as dt
from .expr import Expr, IntImm, Var, as_expr
from .node import Node, node

# A GPU kernel's loops bound to its grid: ``block_x`` iterates over blocks (``blockIdx.x``),
# ``thread_x`` over a block's threads (``threadIdx.x``); each iteration runs on its own block or
# thread, all at once
THREAD_KINDS = ("block_x", "block_y", "block_z", "thread_x", "thread_y", "thread_z")
LOOP_KINDS = ("serial", "parallel", "vectorized", "unrolled") + THREAD_KINDS
# global: argument or heap; local: stack/registers of one kernel (of one GPU thread); shared:
# a GPU block's shared memory, one copy for all its threads
SCOPES = ("global", "local", "shared")


@node
class Buffer(Node):
    """A typed n-d view of memory. ``strides`` are in elements; ``None`` means row-major.

    ``scope`` is ``global`` (a kernel argument, or a heap allocation), ``local`` (scratch on
    the stack, which LLVM can keep in registers once loops over it are unrolled; on a GPU, one
    thread's) or ``shared`` (a GPU block's shared memory).
    ``align`` is the byte alignment the data pointer is guaranteed to have.
    """

    name: str
    shape: tuple
    dtype: str = "float32"
    strides: Optional[tuple] = None
    scope: str = "global"
    align: int = 64

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(as_expr(s) for s in self.shape))
        if self.strides is not None:
            object.__setattr__(self, "strides", tuple(as_expr(s) for s in self.strides))
        dt.check(self.dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def row_strides(self) -> tuple:
        """Strides in elements (row-major when not given explicitly)."""
        if self.strides is not None:
            return self.strides
        out, acc = [], IntImm(1)
        for s in reversed(self.shape):
            out.append(acc)
            acc = s if (isinstance(acc, IntImm) and acc.value == 1) else acc * s
        return tuple(reversed(out))

    def load(self, *indices, predicate=None):
        from .expr import Load

        return Load(self, tuple(as_expr(i) for i in indices), predicate)

    def __getitem__(self, indices):
        if not isinstance(indices, tuple):
            indices = (indices,)
        return self.load(*indices)


class Stmt(Node):
    __slots__ = ()


@node
class For(Stmt):
    var: Var
    min: Expr
    extent: Expr
    kind: str
    body: Stmt


@node
class Store(Stmt):
    buffer: Buffer
    value: Expr
    indices: tuple
    predicate: Optional[Expr] = None


@node
class Allocate(Stmt):
    """Scratch ``buffer`` that lives for ``body``."""

    buffer: Buffer
    body: Stmt


@node
class IfThenElse(Stmt):
    condition: Expr
    then_case: Stmt
    else_case: Optional[Stmt] = None


@node
class LetStmt(Stmt):
    var: Var
    value: Expr
    body: Stmt


@node
class SeqStmt(Stmt):
    stmts: tuple


@node
class Evaluate(Stmt):
    value: Expr


@node
class Barrier(Stmt):
    """Every thread of a GPU block waits here until all have arrived (``__syncthreads``): what
    one thread wrote to shared memory before it, the others read after it."""


@node
class PrimFunc(Node):
    """A kernel: parameters (buffers, then scalar vars such as symbolic dims) and a body."""

    name: str
    params: tuple
    body: Stmt
    attrs: tuple = ()

    @property
    def buffers(self) -> tuple:
        return tuple(p for p in self.params if isinstance(p, Buffer))

    @property
    def scalars(self) -> tuple:
        return tuple(p for p in self.params if isinstance(p, Var))

    def attr(self, key, default=None):
        return dict(self.attrs).get(key, default)

    def script(self) -> str:
        """The program as Python-syntax text that :func:`ember.loop.parse` reads back."""
        from .printer import func_to_str

        return func_to_str(self)


def seq(*stmts) -> Stmt:
    """A statement sequence, flattened, with no-ops dropped."""
    flat = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, SeqStmt):
            flat.extend(s.stmts)
        else:
            flat.append(s)
    if len(flat) == 1:
        return flat[0]
    return SeqStmt(tuple(flat))
