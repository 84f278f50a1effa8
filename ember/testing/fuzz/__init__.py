"""Fuzzing Ember's two front doors: ``ember.compile`` on mutated ONNX models and ``ember.load`` on
mutated exports.

    summary = fuzz(kind="both", seed=0, max_cases=100)        # or minutes=5
    print(summary.table()); summary.failures                   # saved inputs, one folder each

A *case* is one seed input (a small ONNX model built here with random weights, or that model
compiled and exported as a ``.so``) with one to three mutations: byte-level (flip, insert,
delete, truncate, splice, overwrite with interesting values), structure-aware for ONNX (attribute
values, tensor and value-info dims, op types, node inputs and outputs, dtypes, edge names, opset)
and ELF/JSON-aware for exports (bytes inside the ELF headers, a section, the embedded program or
metadata JSON, or whatever follows the sections; truncation). Cases are deterministic: case
``i`` of a run with seed ``s`` is the same on every machine and with any number of workers.

Every case runs in a child process (forked from a clean fork server, the :class:`Zygote`, that
has already imported Ember, so a case costs milliseconds, not an interpreter start) under a
memory limit and a timeout. The child compiles (or loads) the input and, when that succeeds, runs it
once on random inputs of its declared shapes (unless they are symbolic or too large). The
outcome is one of :data:`OUTCOMES`:

- ``ok``: compiled (or loaded) and ran;
- ``ember_error``: an :class:`~ember.errors.EmberError` subclass, the expected rejection;
- ``other_exception``: any other Python exception: a bug (the user should get an EmberError
  naming the node);
- ``crash``: the child died (a signal, or an exit without a result);
- ``hang``: the child ran past the timeout (its Python stack is dumped to the case's log first).

Crashes, hangs and other exceptions are saved under ``out/failures/<kind>-<outcome>-<case>/``
(the input, ``case.json`` with the seed, mutations, traceback and log) and replay with
:func:`replay` (``python bench/fuzz.py --replay DIR``).
"""
from __future__ import annotations

from .campaign import Summary, fuzz, replay, save_failure
from .cases import KINDS, SUFFIX, Case, Corpus
from .child import FAILURES, OUTCOMES, Result, Zygote, build_corpus, run_input
from .mutate_bytes import mutate_bytes
from .mutate_export import elf_regions, mutate_export, mutate_json
from .mutate_onnx import ONNX_MUTATORS, mutate_onnx
from .seeds import seed_models

__all__ = ["Case", "Corpus", "FAILURES", "KINDS", "ONNX_MUTATORS", "OUTCOMES", "Result", "SUFFIX", "Summary", "Zygote",
           "build_corpus", "elf_regions", "fuzz", "mutate_bytes", "mutate_export", "mutate_json", "mutate_onnx",
           "replay", "run_input", "save_failure", "seed_models"]
