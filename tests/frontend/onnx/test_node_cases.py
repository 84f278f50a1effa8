"""Every ONNX node test case: import + type inference agree with the expected outputs, or the
case is reported unsupported up front, never a crash or a wrong type."""
import re

import pytest

from .node_cases import LISTED, report, run_all

# why a case of a listed op may still be unsupported: what Ember does not do yet
ALLOWED = re.compile("|".join([
    r"has type (FLOAT8\w*|U?INT[24]|FLOAT4E2M1|STRING)",  # dtypes Ember lacks
    r"cast to (FLOAT8\w*|U?INT[24]|FLOAT4E2M1|STRING)",
    r"is not a tensor", r"sequences or optionals",  # sequence / optional values
    r"training mode", r"Indices output", r"antialias",
    r"\(opset [1-6]\)",  # models older than opset 7
]))


@pytest.fixture(scope="module")
def results():
    return run_all()


def test_no_crash_no_error_no_wrong_type(results):
    bad = [(r.name, r.status, r.detail[:200]) for r in results if r.status not in ("ok", "unsupported")]
    assert not bad


def test_pass_count(results, capsys):
    ok = sum(r.status == "ok" for r in results)
    with capsys.disabled():
        print("\n" + report(results))
    assert len(results) >= 1800 and ok >= 1290


@pytest.mark.parametrize("op", LISTED)
def test_listed_op_passes_every_case_it_can(results, op):
    mine = [r for r in results if r.ops == {op}]
    assert mine, f"no single-op case of {op}"
    failing = [(r.name, r.detail[:300]) for r in mine if r.status != "ok" and not ALLOWED.search(r.detail)]
    assert not failing
