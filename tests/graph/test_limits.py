"""The compile's memory limit: sizes parsed and printed, the default, nesting, the message."""
import pytest

from ember.errors import ResourceError
from ember.graph import limits


def test_parse_bytes_units():
    assert limits.parse_bytes("4GiB") == 4 * 2 ** 30
    assert limits.parse_bytes("512MB") == 512 * 10 ** 6
    assert limits.parse_bytes("1.5 KiB") == 1536
    assert limits.parse_bytes("1000") == limits.parse_bytes(1000) == 1000
    assert limits.parse_bytes("2g") == 2 * 10 ** 9
    for bad in ("", "4 parsecs", "-1", "0", "GiB", "x1"):
        with pytest.raises(ValueError):
            limits.parse_bytes(bad)


def test_format_bytes():
    assert limits.format_bytes(12) == "12 bytes"
    assert limits.format_bytes(1536) == "1.5 KiB"
    assert limits.format_bytes(2 ** 52) == "4 PiB"


def test_available_memory_is_some_positive_amount():
    n = limits.available_memory()
    assert n is None or n > 2 ** 20


def test_the_default_is_the_available_memory_and_blocks_nest(monkeypatch):
    monkeypatch.setattr(limits, "available_memory", lambda: 10_000)
    assert limits.current_limit()[0] == 10_000
    with limits.memory_limit() as outer:
        assert outer == 10_000
        with limits.memory_limit(500) as inner:
            assert inner == 500 and limits.current_limit() == (500, "the memory_limit")
            with limits.memory_limit(None) as kept:  # a compile inside a compile keeps the limit
                assert kept == 500
        assert limits.current_limit()[0] == 10_000


def test_check_bytes_names_the_thing_the_bytes_and_the_limit():
    with limits.memory_limit("1KiB"):
        limits.check_bytes(1024, "fits")
        with pytest.raises(ResourceError) as e:
            limits.check_bytes(4096, "initializer 'w' of shape [32, 32]")
    msg = str(e.value)
    assert "initializer 'w' of shape [32, 32]" in msg and "4096 bytes" in msg and "1024 bytes" in msg
    assert "memory_limit" in msg


def test_allocating_turns_memory_error_into_resource_error():
    with pytest.raises(ResourceError, match="could not allocate"):
        with limits.allocating(10, "a thing"):
            raise MemoryError()


def test_tensor_bytes_does_not_wrap():
    assert limits.tensor_bytes((2 ** 40, 2 ** 40), "float32") == 2 ** 82


def test_the_default_respects_an_address_space_rlimit():
    import subprocess
    import sys

    code = ("import resource; resource.setrlimit(resource.RLIMIT_AS, (2**32, 2**32)); "
            "from ember.graph.limits import available_memory; print(available_memory())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert 0 <= int(out) < 2 ** 32
