"""Errors of the PyTorch frontend."""
from ...errors import ModelError


class TrainingGraphError(ModelError):
    """The program trains (a batch norm on batch statistics, dropout, a buffer it updates, outputs
    that require grad): Ember compiles inference only. The message lists what was found and says
    what to do (``model.eval()``, ``torch.no_grad()``)."""


__all__ = ["TrainingGraphError"]
