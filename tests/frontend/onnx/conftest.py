"""The ONNX frontend tests need the onnx package (the `test` extra installs it)."""
import importlib.util

if importlib.util.find_spec("onnx") is None:
    collect_ignore_glob = ["test_*.py", "node_cases.py", "helpers.py"]
