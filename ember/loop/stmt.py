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
class WarpMma(Stmt):
    """A warp's matrix product on tensor cores, PTX's ``mma.sync.m16n8k16.row.col`` with float32
    accumulators: D (16x8) = A (16x16) B (16x8) + C. Each of the warp's 32 lanes holds a
    fragment of each matrix in its own (``local``) buffers, from the element offsets given:
    8 values of A and 4 of B (``float16`` or ``bfloat16``), 4 float32 of C and of D. With
    ``lane = 4 g + t``: A's value ``e`` is row ``g + 8 (e // 2 % 2)``, column
    ``2 t + e % 2 + 8 (e // 4)``; B's value ``e`` is row (k) ``2 t + e % 2 + 8 (e // 2)``, column
    ``g``; C's and D's value ``e`` is row ``g + 8 (e // 2)``, column ``2 t + e % 2``. Every lane of
    the warp must execute it together (like a barrier, it may not sit under a condition that
    depends on the thread)."""

    d: Buffer
    d_offset: Expr
    a: Buffer
    a_offset: Expr
    b: Buffer
    b_offset: Expr
    c: Buffer
    c_offset: Expr


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
