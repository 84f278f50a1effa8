"""Ember vs ONNX Runtime on whole models (see ``ember bench --help``):

    python bench/models.py --all-light
"""
import sys

from ember.bench.models import main

if __name__ == "__main__":
    sys.exit(main())
