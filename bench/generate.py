"""Token generation with a KV cache: a decoder as optimum exports it, Ember against ONNX Runtime
on the same file, each alone in a process of its own.

A small Llama (random weights, saved with ``save_pretrained``) is exported by optimum as
``text-generation-with-past``. A generation is a prefill of ``--prompt`` tokens (past length
0) and then ``--steps`` decode steps of one token each, the past growing by one per step, the
next token the argmax of the logits (both runtimes must pick the same tokens). Each runtime
generates ``--rounds`` times in its process: the first generation meets every past length for
the first time (Ember lays out each new set of sizes once), the later ones are steady state.

    python bench/generate.py [--prompt 128] [--steps 64] [--rounds 3] [--hidden 256 --layers 4]
    python bench/generate.py --precision bf16      # Ember in bf16 against ORT in float32
    python bench/generate.py --weights int4        # both on ORT's MatMulNBits file (4 bits, blocks of 32)

Prints the prefill time, decode tokens/s, and the first generation's extra cost per new past
length, for both runtimes, with their ratios.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

CACHE = os.path.join(os.environ.get("EMBER_CACHE_DIR", os.path.expanduser("~/.cache/ember")), "generate")


def export(hidden: int, layers: int, vocab: int) -> str:
    """The optimum export of a random-weight Llama (made once, kept under the cache)."""
    folder = os.path.join(CACHE, f"llama_h{hidden}_l{layers}_v{vocab}")
    path = os.path.join(folder, "onnx", "model.onnx")
    if os.path.exists(path):
        return path
    import torch
    from optimum.exporters.onnx import main_export
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    heads = max(hidden // 64, 2)
    cfg = LlamaConfig(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                      num_key_value_heads=max(heads // 2, 1), intermediate_size=hidden * 8 // 3, vocab_size=vocab,
                      max_position_embeddings=4096)
    LlamaForCausalLM(cfg).eval().save_pretrained(os.path.join(folder, "src"))
    main_export(os.path.join(folder, "src"), output=os.path.join(folder, "onnx"), task="text-generation-with-past",
                do_validation=False)
    return path


def quantize_weights(path: str, bits: int, block: int = 32) -> str:
    """The file with its MatMul weights quantized to ``bits`` in blocks of ``block`` along K by ONNX
    Runtime's weight-only quantizer (``MatMulNBits``: how LLMs ship for CPUs), made once beside it."""
    out = os.path.join(os.path.dirname(path), f"model_int{bits}_b{block}.onnx")
    if os.path.exists(out):
        return out
    import logging

    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    logging.getLogger("onnxruntime.quantization.matmul_nbits_quantizer").setLevel(logging.WARNING)
    q = MatMulNBitsQuantizer(onnx.load(path), bits=bits, block_size=block, is_symmetric=False)
    q.process()
    onnx.save(q.model.model, out)
    return out


def _session(runtime: str, path: str, threads: int, precision: str = "fp32"):
    """(run(feeds) -> dict of outputs by name, the input names)."""
    if runtime == "ember":
        import ember

        exe = ember.compile(path, precision=precision, wait=True)
        exe.threads_per_run = threads
        names = [o.name for o in exe.output_info]
        return (lambda feeds: dict(zip(names, exe.run(**feeds)))), [i.name for i in exe.input_info]
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.log_severity_level = 3
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return (lambda feeds: dict(zip(names, sess.run(None, feeds)))), [i.name for i in sess.get_inputs()]


def _empty_past(path: str) -> dict:
    import onnx

    m = onnx.load(path, load_external_data=False)
    out = {}
    for i in m.graph.input:
        if i.name.startswith("past_key_values"):
            dims = [d.dim_value if d.HasField("dim_value") else 0 for d in i.type.tensor_type.shape.dim]
            dims[0] = 1
            out[i.name] = np.zeros(dims, np.float32)
    return out


def generate(run, names: list, past: dict, prompt: np.ndarray, steps: int) -> tuple:
    """(tokens, prefill seconds, each decode step's seconds)."""
    ids, n = prompt, prompt.shape[1]
    feeds = dict(past)
    tokens, times = [], []
    for step in range(steps + 1):
        total = feeds[next(iter(past))].shape[2] + ids.shape[1]
        feeds.update(input_ids=ids, attention_mask=np.ones((1, total), np.int64))
        if "position_ids" in names:
            feeds["position_ids"] = np.arange(total - ids.shape[1], total, dtype=np.int64)[None]
        t0 = time.perf_counter()
        out = run(feeds)
        times.append(time.perf_counter() - t0)
        nxt = int(np.argmax(out["logits"][0, -1]))
        tokens.append(nxt)
        ids = np.array([[nxt]], np.int64)
        for k in past:
            feeds[k] = out[k.replace("past_key_values", "present")]
    assert len(tokens) == steps + 1 and n > 0
    return tokens, times[0], times[1:]


def child(runtime: str, path: str, prompt_len: int, steps: int, rounds: int, threads: int, vocab: int,
          precision: str = "fp32") -> dict:
    run, names = _session(runtime, path, threads, precision)
    prompt = np.random.default_rng(0).integers(0, vocab, (1, prompt_len)).astype(np.int64)
    past = _empty_past(path)
    gens = [generate(run, names, past, prompt, steps) for _ in range(rounds)]
    return {"tokens": gens[0][0], "prefill": [g[1] for g in gens], "steps": [g[2] for g in gens]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prompt", type=int, default=128, help="prompt tokens (default 128)")
    p.add_argument("--steps", type=int, default=64, help="decode steps (default 64)")
    p.add_argument("--rounds", type=int, default=3, help="generations per process (default 3)")
    p.add_argument("--processes", type=int, default=2, help="processes per runtime, alternating (default 2)")
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--vocab", type=int, default=8000)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--model", help="an optimum text-generation-with-past export (default: the Llama above)")
    p.add_argument("--precision", default="fp32", choices=("fp32", "bf16"),
                   help="Ember's (ORT runs the file as it is: float32); bf16 needs AVX512-BF16")
    p.add_argument("--weights", default="fp32", choices=("fp32", "int4", "int8"),
                   help="the file's weights: as exported, or quantized by ONNX Runtime's weight-only quantizer "
                        "(MatMulNBits, blocks of 32) for both runtimes")
    p.add_argument("--child", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    path = a.model or export(a.hidden, a.layers, a.vocab)
    if a.weights != "fp32" and not a.child:
        path = quantize_weights(path, int(a.weights[3:]))
    if a.child:
        print(json.dumps(child(a.child, path, a.prompt, a.steps, a.rounds, a.threads, a.vocab, a.precision)))
        return 0
    import ember

    ember.compile(path, precision=a.precision, wait=True)  # once here, so that the children load the kernels from the cache
    res: dict = {"ember": [], "onnxruntime": []}
    for _ in range(a.processes):
        for rt in res:
            cmd = [sys.executable, __file__, "--child", rt, "--model", path, "--prompt", str(a.prompt),
                   "--steps", str(a.steps), "--rounds", str(a.rounds), "--threads", str(a.threads), "--vocab", str(a.vocab),
                   "--precision", a.precision]
            out = subprocess.run(cmd, capture_output=True, text=True)
            if out.returncode:
                print(out.stderr[-3000:], file=sys.stderr)
                return 1
            res[rt].append(json.loads(out.stdout.strip().splitlines()[-1]))
    same = res["ember"][0]["tokens"] == res["onnxruntime"][0]["tokens"]
    print(f"{os.path.basename(os.path.dirname(os.path.dirname(path)))} ({os.path.basename(path)}): prompt {a.prompt}, {a.steps} decode steps, "
          f"{a.processes} processes x {a.rounds} generations each; tokens {'identical' if same else 'DIFFER'}")
    fig = {}
    for rt, runs in res.items():
        steady = [g for r in runs for g in r["steps"][1:]] or [g for r in runs for g in r["steps"]]
        first = [r["steps"][0] for r in runs]
        prefill = statistics.median(t for r in runs for t in r["prefill"][1:] or r["prefill"])
        per_step = statistics.median(sum(g) / len(g) for g in steady)
        new_size = statistics.median(sum(f) / len(f) for f in first) - per_step
        fig[rt] = (prefill, 1 / per_step, new_size)
        print(f"  {rt:12s} prefill {prefill * 1e3:8.2f} ms   decode {1 / per_step:8.1f} tokens/s "
              f"({per_step * 1e3:.2f} ms a step)   first generation: {new_size * 1e3:+.2f} ms a step (a new past length)")
    e, o = fig["ember"], fig["onnxruntime"]
    print(f"  Ember / ONNX Runtime: prefill time {e[0] / o[0]:.2f}x, decode tokens/s {e[1] / o[1]:.2f}x")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
