"""torch stays optional: Ember imports and compiles without it."""
import os
import subprocess
import sys

import ember

_SCRIPT = """
import sys
sys.modules["torch"] = None  # (import torch raises ImportError)
import numpy as np
import ember
from ember.graph import Function, Module, TensorType, Var
from ember.graph.ops import call
x = Var("x", TensorType((2, 3), "float32"))
y = call("nn.relu", x)
exe = ember.compile(Module({"main": Function([x], y, y.type)}))
assert (exe.run(np.full((2, 3), -1, np.float32))[0] == 0).all()
assert "torch" not in [m for m, v in sys.modules.items() if v is not None and m.split(".")[0] == "torch"]
try:
    ember.from_torch(None, ())
except ImportError as e:
    print("no torch:", e)
"""


def test_ember_imports_and_compiles_without_torch(ember_cache_dir):
    root = os.path.dirname(os.path.dirname(ember.__file__))
    env = dict(os.environ, EMBER_CACHE_DIR=ember_cache_dir, PYTHONPATH=root)
    res = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, env=env, cwd=root,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "no torch:" in res.stdout
