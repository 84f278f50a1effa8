"""A case: one seed input with one to three mutations, the same on every machine for a run's seed
and the case's number (:class:`Corpus`)."""
from __future__ import annotations

import dataclasses
import random
from typing import Dict, List, Optional

from .mutate_export import elf_regions, mutate_export
from .mutate_onnx import mutate_onnx


KINDS = ("onnx", "export")
SUFFIX = {"onnx": ".onnx", "export": ".so"}


@dataclasses.dataclass
class Case:
    """One fuzz input: ``data`` is the mutated model (ONNX bytes or a library)."""

    kind: str
    index: int
    seed: int  # the random inputs of the run
    source: str  # the seed model it was made from
    mutations: List[str]
    data: bytes = dataclasses.field(repr=False)


class Corpus:
    """Seed inputs: ONNX models (serialized) and, for ``export`` cases, those models exported."""

    def __init__(self, onnx_models: Dict[str, bytes], exports: Optional[Dict[str, bytes]] = None):
        self.onnx = dict(onnx_models)
        self.exports = dict(exports or {})
        self.regions = {k: elf_regions(v) for k, v in self.exports.items()}

    def make_case(self, kind: str, run_seed: int, index: int) -> Case:
        rng = random.Random(f"ember-fuzz:{run_seed}:{kind}:{index}")
        seeds = self.onnx if kind == "onnx" else self.exports
        source = rng.choice(sorted(seeds))
        others = [seeds[k] for k in sorted(seeds)]
        if kind == "onnx":
            data, muts = mutate_onnx(seeds[source], rng, others)
        else:
            data, muts = seeds[source], []
            data_only = True  # no change outside the program, metadata and weights so far
            for _ in range(rng.choice([1, 1, 1, 2, 3])):
                regions = self.regions[source] if not muts else elf_regions(data)
                data, d = mutate_export(data, rng, regions, others, may_reseal=data_only)
                data_only = data_only and d.startswith(("json", "weights:"))
                muts.append(d)
        return Case(kind, index, rng.getrandbits(32), source, muts, data)
