import pytest

from ember.errors import EmberError
from ember.graph import Var
from ember.graph.passes import (PassContext, PassError, PassTimer, PrintAfterPass, VerifyAfterPass,
                                graph_pass)

from .conftest import T, call, module


@graph_pass("to_exp", opt_level=2)
def to_exp(mod, ctx):
    return module(list(mod.main.params), call("exp", mod.main.body.args[0]))


@graph_pass("breaks_types", opt_level=0)
def breaks_types(mod, ctx):
    bad = mod.main.body.replace(type=T(3, 3))  # a relu whose recorded type is wrong
    return mod.with_function("main", mod.main.replace(body=bad))


def _mod():
    x = Var("x", T(4))
    return module([x], call("nn.relu", x))


def test_opt_level_gates_a_pass():
    mod = _mod()
    assert PassContext(opt_level=1).run(mod, [to_exp]) is mod
    assert PassContext(opt_level=2).run(mod, [to_exp]).main.body.op == "exp"


def test_disabled_pass_is_skipped_and_unknown_names_are_errors():
    mod = _mod()
    assert PassContext(opt_level=3, disabled={"to_exp"}).run(mod, [to_exp]) is mod
    with pytest.raises(EmberError, match="fold_constnat"):
        PassContext(disabled={"fold_constnat"}).run(mod, [to_exp])


def test_timer_records_every_pass_that_ran():
    timer = PassTimer()
    PassContext(opt_level=3, instruments=[timer]).run(_mod(), [to_exp, to_exp])
    assert [n for n, _ in timer.times] == ["to_exp", "to_exp"]
    assert all(t >= 0 for _, t in timer.times)
    assert "total" in timer.report()


def test_verify_names_the_pass_that_broke_the_graph():
    with pytest.raises(PassError, match="breaks_types"):
        PassContext(instruments=[VerifyAfterPass()]).run(_mod(), [to_exp, breaks_types])


def test_print_after_pass():
    seen = []
    PassContext(opt_level=3, instruments=[PrintAfterPass(seen.append)]).run(_mod(), [to_exp])
    assert seen and "after to_exp" in seen[0] and "exp(" in seen[0]


def test_bad_opt_level():
    with pytest.raises(EmberError, match="opt_level"):
        PassContext(opt_level=7)
