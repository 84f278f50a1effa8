"""Graph passes: functions ``Module -> Module`` run by a :class:`PassContext`.

One file per pass. :func:`default_pipeline` is what ``ember.compile`` runs.
"""
from .context import (Instrument, Pass, PassContext, PassError, PassTimer, PrintAfterPass,
                      VerifyAfterPass, graph_pass)
from .fuse_ops import fuse_ops
from .verify import verify


def default_pipeline() -> list:
    """The passes ``ember.compile`` runs, in order (each gated by its opt level)."""
    return [fuse_ops]


__all__ = ["Instrument", "Pass", "PassContext", "PassError", "PassTimer", "PrintAfterPass",
           "VerifyAfterPass", "default_pipeline", "fuse_ops", "graph_pass", "verify"]
