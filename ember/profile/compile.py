"""Where compile time goes: per graph pass, per kernel (schedule, lowering, loop passes, LLVM IR
emission, LLVM optimization, LLVM code generation) and linking.

``ember.compile`` records it on every executable (``exe.compile_profile``); ``ember compile
--profile-compile`` prints it. A kernel whose LLVM time exceeds a budget is named with its
schedule, because a schedule (full unrolling of a big loop, a vectorized float16 loop LLVM
scalarizes) is what usually makes one kernel take minutes to compile.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Optional

from .report import render

# per-kernel phases, in the order they run
PHASES = ("schedule", "lower", "loop_passes", "llvm_emit", "llvm_opt", "llvm_codegen")
_LABELS = {"schedule": "computes + schedule", "lower": "lower to loop IR", "loop_passes": "loop passes",
           "llvm_emit": "LLVM IR emission", "llvm_opt": "LLVM optimization", "llvm_codegen": "LLVM code generation"}


@dataclasses.dataclass
class KernelCompile:
    """One kernel's compile: seconds per phase, its loop nest, and its schedule."""

    name: str
    times: dict
    cached: bool
    loops: int = 0
    depth: int = 0
    llvm_lines: int = 0
    schedule: str = ""  # the trace of primitive calls, one per line

    @property
    def total(self) -> float:
        return sum(self.times.get(p, 0.0) for p in PHASES)

    @property
    def llvm(self) -> float:
        return self.times.get("llvm_opt", 0.0) + self.times.get("llvm_codegen", 0.0)


@dataclasses.dataclass
class CompileProfile:
    """Phases of one ``ember.compile`` (wall seconds) and the kernels it compiled."""

    model: str
    phases: dict  # import, pass NAME, lower groups, codegen, total (wall seconds)
    kernels: list
    link: float = 0.0

    @classmethod
    def collect(cls, model: str, phases: dict, stats: dict, kernel_sources: list) -> "CompileProfile":
        traces = {name: sch.trace.text() if args is not None else "(a loop program written directly)"
                  for sch, args, name in kernel_sources}
        kernels = []
        for name, s in stats.items():
            if name.startswith("("):
                continue
            kernels.append(KernelCompile(name, {p: s[p] for p in PHASES if p in s}, bool(s.get("cached")),
                                         s.get("loops", 0), s.get("depth", 0), s.get("llvm_lines", 0),
                                         traces.get(name) or s.get("trace", "")))
        return cls(model, dict(phases), kernels, stats.get("(link)", {}).get("link", 0.0))

    def phase_sums(self) -> dict:
        """Seconds per kernel phase summed over kernels (LLVM phases are CPU seconds: with
        parallel workers they exceed the wall time of the codegen phase)."""
        return {p: sum(k.times.get(p, 0.0) for k in self.kernels) for p in PHASES}

    def slowest(self, top: int = 10) -> list:
        return sorted(self.kernels, key=lambda k: -k.total)[:top]

    def over_budget(self, budget: float) -> list:
        """Kernels whose LLVM optimization and code generation took longer than ``budget`` s."""
        return [k for k in self.slowest(len(self.kernels)) if k.llvm > budget]

    def table(self, top: int = 10, budget: Optional[float] = None, width: int = 150) -> str:
        total = self.phases.get("total", 0.0)
        cached = sum(k.cached for k in self.kernels)
        rows = [[name, f"{sec:.3f}", f"{100 * sec / total:.1f}" if total else ""]
                for name, sec in self.phases.items() if name != "total"]
        sums = self.phase_sums()
        rows += [[f"  kernels: {_LABELS[p]}", f"{sums[p]:.3f}", ""] for p in PHASES]
        rows.append(["  link", f"{self.link:.3f}", ""])
        head = render(f"Ember compile-time profile: {self.model} ({total:.2f} s; {len(self.kernels)} kernels, "
                      f"{cached} from the cache)", ["phase", "seconds", "% of total"], rows,
                      caption="'kernels:' rows sum over kernels; LLVM rows are CPU seconds across the "
                              "parallel compile workers, inside the codegen phase's wall time.",
                      width=width, right=(1, 2))
        krows = [[k.name, f"{k.total:.3f}"] + [f"{k.times.get(p, 0.0):.3f}" for p in PHASES]
                 + [str(k.loops), str(k.depth), str(k.llvm_lines), "yes" if k.cached else ""]
                 for k in self.slowest(top)]
        body = render(f"slowest {len(krows)} kernels", ["kernel", "total s", *(p.replace("_", " ") for p in PHASES),
                      "loops", "depth", "LLVM lines", "cached"], krows, width=width, right=range(1, 12), nowrap=(0,))
        out = head + body
        if budget is not None:
            slow = self.over_budget(budget)
            if slow:
                out += f"\n{len(slow)} kernel(s) over the {budget:g} s LLVM budget:\n"
                for k in slow:
                    out += (f"\n{k.name}: LLVM {k.llvm:.2f} s ({k.loops} loops, depth {k.depth}, "
                            f"{k.llvm_lines} lines of LLVM IR); its schedule:\n")
                    out += "".join(f"    {line}\n" for line in (k.schedule or "(default, no primitives)").splitlines())
            else:
                out += f"\nno kernel over the {budget:g} s LLVM budget\n"
        return out

    def to_json(self, path: Optional[str] = None) -> str:
        doc = {"model": self.model, "phases": self.phases, "link": self.link,
               "kernels": [dict(dataclasses.asdict(k), total=k.total) for k in self.kernels]}
        text = json.dumps(doc, indent=1)
        if path:
            with open(path, "w") as f:
                f.write(text)
        return text


__all__ = ["CompileProfile", "KernelCompile"]
