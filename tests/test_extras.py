"""A feature used without its optional extra names the extra to install (issue 46)."""
import subprocess
import sys

import pytest

from ember.extras import missing_extra_message

_WITHOUT = "import sys\nfor m in {mods!r}: sys.modules[m] = None\nfrom ember.cli import main\nsys.exit(main({argv!r}))"


def _run_without(mods, argv):
    return subprocess.run([sys.executable, "-c", _WITHOUT.format(mods=mods, argv=argv)],
                          capture_output=True, text=True, timeout=120)


def test_ember_tune_without_the_tune_extra_says_which_extra_before_any_work(tmp_path):
    r = _run_without(("sqlalchemy", "lightgbm", "distributed"),
                     ["tune", "--light", "squeezenet", "--minutes", "1", "--db", str(tmp_path / "t.db")])
    assert r.returncode == 2, r.stderr
    assert "pip install 'ember[tune]'" in r.stderr and "Traceback" not in r.stderr
    assert "extracting tasks" not in r.stdout  # stopped before compiling the model


def test_only_modules_an_extra_provides_get_the_message():
    assert "ember[plot]" in missing_extra_message(ModuleNotFoundError("no", name="matplotlib.pyplot"), "--plot")
    assert missing_extra_message(ModuleNotFoundError("no", name="ember.nothing"), "x") is None
    with pytest.raises(ModuleNotFoundError):
        from ember.extras import require
        require("ember_no_such_module")
