"""Does the cost model learn across models? Trials to the first improvement, with and without
records of another model.

    python bench/tune_transfer.py                         # MobileNetV2 -> EfficientNet-B0, 3 min each
    python bench/tune_transfer.py --source resnet18 --minutes 2

1. tune the source model (zoo) into a database;
2. tune the target model twice for the same time: once on a copy of that database (its
   records, of other workloads, train the cost model before the first measurement), once on an
   empty one;
3. per task: how many trials until a candidate first beats the default by 2% (the default is
   trial 1), and the best speedup reached; medians over the tasks both runs improved.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--source", default="mobilenet_v2")
    p.add_argument("--target", default="efficientnet_b0")
    p.add_argument("--minutes", type=float, default=3.0, help="each of the three runs (default 3)")
    p.add_argument("--cluster", default=None)
    a = p.parse_args(argv)
    from ember.bench.zoo import export
    from ember.tune.tuner import tune

    zoo = os.path.join(os.path.expanduser("~"), ".cache", "ember", "zoo")
    tmp = tempfile.mkdtemp(prefix="ember-transfer-")
    src_db, with_db, without_db = (os.path.join(tmp, f"{n}.db") for n in ("source", "with", "without"))
    src = tune(export(a.source, zoo), src_db, minutes=a.minutes, cluster=a.cluster, progress=False, transfer=False)
    print(f"source {a.source}: {src.trials} records")
    shutil.copy(src_db, with_db)
    target = export(a.target, zoo)
    runs = {"with transfer": tune(target, with_db, minutes=a.minutes, cluster=a.cluster, progress=False),
            "without": tune(target, without_db, minutes=a.minutes, cluster=a.cluster, progress=False,
                            transfer=False)}
    print(f"\n{a.target}, {a.minutes:g} min each; cost model pre-trained on "
          f"{runs['with transfer'].transfer_samples} records of {a.source} in the first run")
    print(f"{'task':44} {'1st gain (with)':>16} {'(without)':>10} {'best (with)':>12} {'(without)':>10}")
    firsts = {k: {} for k in runs}
    for t_with, t_without in zip(runs["with transfer"].tasks, runs["without"].tasks):
        for k, t in (("with transfer", t_with), ("without", t_without)):
            firsts[k][t.workload] = t.first_improvement
        f = lambda x: "-" if x is None else str(x)
        print(f"{t_with.description[:44]:44} {f(t_with.first_improvement):>16} {f(t_without.first_improvement):>10} "
              f"{t_with.speedup:11.2f}x {t_without.speedup:9.2f}x")
    for k, rep in runs.items():
        got = [v for v in firsts[k].values() if v is not None]
        print(f"{k:14}: {len(got)}/{len(firsts[k])} tasks improved; trials to the first improvement: median "
              f"{statistics.median(got) if got else '-'}, mean {statistics.mean(got) if got else float('nan'):.1f}; "
              f"estimated latency {rep.latency_untuned * 1e3:.2f} -> {rep.latency_estimate * 1e3:.2f} ms, "
              f"{rep.trials} trials")
    both = [w for w in firsts["with transfer"] if firsts["with transfer"][w] and firsts["without"].get(w)]
    if both:
        print(f"tasks both improved ({len(both)}): median trials to the first improvement "
              f"{statistics.median(firsts['with transfer'][w] for w in both)} with transfer, "
              f"{statistics.median(firsts['without'][w] for w in both)} without")
    return 0


if __name__ == "__main__":
    sys.exit(main())
