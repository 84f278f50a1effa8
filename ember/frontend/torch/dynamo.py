"""``torch.compile(model, backend="ember")``: a Dynamo backend that compiles each FX graph with
Ember.

Dynamo hands the backend one graph per guard set (a new set of guards -- another input dtype,
rank, or a size it had specialized -- is a new graph, and a new call here); the executable
made for it keeps Dynamo's dynamic sizes symbolic, so one compile serves every size the
guards admit, and kernels already built for another graph come from Ember's kernel cache.

Each graph is exported with ``torch.export`` into core ATen and imported by the same
converters as :func:`~ember.frontend.torch.from_torch`. The module's parameters and buffers,
which Dynamo passes as graph inputs, are compiled in as constants (Inductor's "freezing"): a
call checks that each is still the same tensor at the same version, and compiles again if a
weight was replaced or written in place (``load_state_dict``).

A graph with ops Ember does not convert runs in eager PyTorch instead, with one warning that
names the ops. A training graph (outputs that require grad: a module called with autograd on)
is a :class:`~ember.frontend.torch.errors.TrainingGraphError`: Ember compiles inference only.
"""
from __future__ import annotations

import logging
import warnings
from typing import Any, Optional

from ...errors import ModelError, UnsupportedOpError
from .errors import TrainingGraphError

log = logging.getLogger(__name__)

# figures of this process's compiles, for tests and the curious: graphs compiled, graphs
# that fell back to eager, recompiles after a weight changed, and the kernels those compiles
# built and took from Ember's kernel cache
STATS = {"compiled": 0, "fallbacks": 0, "recompiles": 0, "kernels_built": 0, "kernels_cached": 0}


def _is_weight(node, example) -> bool:
    """A parameter or buffer of a module (Dynamo passes them as inputs of the graph)."""
    import torch

    if isinstance(example, torch.nn.Parameter):
        return True
    ga = node.meta.get("grapharg")
    name = getattr(getattr(ga, "source", None), "name", "")
    name = name() if callable(name) else name
    return "._parameters[" in name or "._buffers[" in name or "_buffers" in node.name \
        or "_parameters_" in node.name


class _Graph:
    """One Dynamo graph: which of its inputs are weights, sizes or user tensors."""

    def __init__(self, gm, example_inputs):
        import torch

        self.gm = gm
        self.nodes = [n for n in gm.graph.nodes if n.op == "placeholder"]
        self.weights: dict = {}  # placeholder index -> tensor
        self.user: list = []  # placeholder indices of the user's tensors
        self.sizes: dict = {}  # placeholder index -> (position among user tensors, axis)
        sources = {}
        for i, (n, ex) in enumerate(zip(self.nodes, example_inputs)):
            if isinstance(ex, torch.Tensor):
                if _is_weight(n, ex):
                    self.weights[i] = ex
                else:
                    sources[getattr(n.meta.get("grapharg"), "source", None)] = len(self.user)
                    self.user.append(i)
        for i, (n, ex) in enumerate(zip(self.nodes, example_inputs)):
            if isinstance(ex, torch.Tensor):
                continue
            src = getattr(n.meta.get("grapharg"), "source", None)
            base, idx = getattr(src, "base", None), getattr(src, "idx", None)
            if base in sources and idx is not None and "SIZE" in str(getattr(src, "prop", "")):
                self.sizes[i] = (sources[base], int(idx))
            else:
                raise UnsupportedOpError(f"graph input {n.name!r} is a {type(ex).__name__} that is not a tensor "
                                         "size (Ember compiles graphs of tensors and their sizes)")
        self.examples = list(example_inputs)

    def signature(self, args) -> tuple:
        """What identifies the weights in ``args``: each one's memory and version."""
        return tuple((args[i].data_ptr(), args[i]._version) for i in sorted(self.weights))

    def training(self) -> list:
        import torch

        if not torch.is_grad_enabled():
            return []
        out = next(n for n in self.gm.graph.nodes if n.op == "output")
        flat = out.args[0] if isinstance(out.args[0], (list, tuple)) else [out.args[0]]
        return [getattr(n, "name", str(n)) for n in flat
                if getattr(getattr(n, "meta", {}).get("example_value"), "requires_grad", False)]

    def module(self, weights: dict):
        """A module of the user tensors alone, the weights as its buffers, for torch.export."""
        import torch

        graph = self

        class Frozen(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.gm = graph.gm
                for i, t in weights.items():
                    self.register_buffer(f"w{i}", t.detach())

            def forward(self, *user):
                args = []
                for i in range(len(graph.nodes)):
                    if i in graph.weights:
                        args.append(getattr(self, f"w{i}"))
                    elif i in graph.sizes:
                        k, axis = graph.sizes[i]
                        args.append(user[k].shape[axis])
                    else:
                        args.append(user[graph.user.index(i)])
                return self.gm(*args)

        return Frozen().eval()

    def dynamic_shapes(self):
        """Dim.AUTO on each axis Dynamo made dynamic (export names and relates them), for
        ``Frozen.forward(*user)``; None when every size is static."""
        import torch

        specs = []
        for i in self.user:
            val = self.nodes[i].meta.get("example_value")
            axes = {a: torch.export.Dim.AUTO for a, d in enumerate(getattr(val, "shape", ()))
                    if not isinstance(d, int)}
            specs.append(axes or None)
        return {"user": tuple(specs)} if any(specs) else None


class _Compiled:
    """The callable Dynamo runs in place of a graph."""

    def __init__(self, graph: _Graph, options: dict):
        self.graph = graph
        self.options = options
        self.model = None
        self._sig = None

    def build(self, args) -> None:
        from . import from_torch

        g = self.graph
        weights = {i: args[i] for i in g.weights}
        user = [args[i] for i in g.user]
        import torch._guards

        # (outside Dynamo's tracing context: torch.export traces with its own, and guards it
        # added to Dynamo's would fail on the frame being compiled)
        with torch._guards.tracing(None):
            self.model = from_torch(g.module(weights), tuple(user), dynamic_shapes=g.dynamic_shapes(),
                                    name=self.options.get("name", "dynamo_graph"),
                                    **{k: v for k, v in self.options.items() if k != "name"})
        self._sig = g.signature(args)
        kernels = self.model.exe.compile_profile.kernels
        STATS["kernels_cached"] += sum(k.cached for k in kernels)
        STATS["kernels_built"] += sum(not k.cached for k in kernels)

    def __call__(self, *args):
        g = self.graph
        if g.signature(args) != self._sig:  # a weight was replaced or written in place
            STATS["recompiles"] += 1
            self.build(args)
        return tuple(self.model.run_flat([args[i] for i in g.user]))


def _unsupported_names(e: Exception) -> str:
    ops = getattr(e, "unsupported_ops", None)
    return ", ".join(sorted(ops)) if ops else str(e).splitlines()[0]


def ember_backend(gm, example_inputs, options: Optional[dict] = None, **kwargs: Any):
    """The Dynamo backend: ``torch.compile(model, backend="ember")``. ``options`` (``{"opt_level":
    2, "target": ...}``) go to :func:`ember.compile`."""
    opts = dict(options or {}, **kwargs)
    graph = None
    try:
        graph = _Graph(gm, example_inputs)
        found = graph.training()
        if found:
            raise TrainingGraphError(
                f"torch.compile handed Ember a training graph: its output(s) {', '.join(found)} require grad. "
                "Ember compiles inference only: call the model under torch.no_grad() or torch.inference_mode() "
                "(or use another backend to train)")
        compiled = _Compiled(graph, opts)
        compiled.build(example_inputs)
    except TrainingGraphError:
        raise
    except (UnsupportedOpError, ModelError) as e:
        STATS["fallbacks"] += 1
        warnings.warn(f"ember: this graph runs in eager PyTorch: Ember cannot compile it "
                      f"({_unsupported_names(e)})", stacklevel=2)
        log.info("ember fallback: %s", e)
        return gm.forward
    STATS["compiled"] += 1
    return compiled


def register() -> None:
    """Register ``"ember"`` with Dynamo, for a process where Ember is importable but not
    installed. Where Dynamo already knows the name from the ``torch_dynamo_backends`` entry
    point, it registers ``ember_backend`` itself right after importing this module -- a
    registration here first made that one fail with "duplicate name: ember", so a fresh
    ``torch.compile(model, backend="ember")`` never ran."""
    from torch._dynamo.backends import registry

    if "ember" in registry._COMPILER_FNS or registry._BACKENDS.get("ember") is not None:
        return
    registry.register_backend(compiler_fn=ember_backend, name="ember")


__all__ = ["STATS", "ember_backend", "register"]
