"""The loop IR: one kernel as loops, loads and stores over buffers [TIR]."""
from . import dtype
from .expr import (Add, And, BinaryOp, Broadcast, Call, Cast, CmpOp, Div, EQ, Expr, FloatImm, FloorDiv,
                   FloorMod, GE, GT, IntImm, LE, LT, Let, Load, Max, Min, Mod, Mul, NE, Not, Or, Ramp,
                   Select, Sub, Var, as_expr, cast, const, eq, if_then_else, logical_and, max_, min_, ne,
                   select, truncdiv, truncmod)
from .stmt import (THREAD_KINDS, Allocate, Barrier, Buffer, Evaluate, For, IfThenElse, LetStmt, PrimFunc, SeqStmt, Stmt, Store,
                   seq)
from .visit import free_vars, rewrite, substitute, walk
from .parser import parse
from . import compute, intrinsics
from .arith import simplify
from .compute import compute as compute_tensor, placeholder, reduce_axis
from .lower import lower
from .schedule import Schedule, Trace
