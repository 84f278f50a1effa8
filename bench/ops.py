"""Ember's kernels against numpy: ``python bench/ops.py [--quick] [--only matmul] [--json FILE]``."""
import sys

from ember.bench.ops import main

if __name__ == "__main__":
    sys.exit(main())
