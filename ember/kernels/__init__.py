"""Kernels: each op's computation paired with its default schedule for the CPU target.

Every kernel is a function returning ``(schedule, args)`` ready for :func:`ember.build`; its
compute and its schedule are also separate functions so the graph compiler can reuse the
compute and replace the schedule (with a tuned trace, say).
"""
from .elementwise import broadcast_binary, schedule_elementwise
from .matmul import batch_matmul, matmul, schedule_matmul
from .conv2d import conv2d_nchw
from .norm import layer_norm, softmax
from .reduce import reduce
from .transpose import transpose
