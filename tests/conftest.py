"""Shared pytest setup."""
import os
import tempfile

import pytest

# Compiled kernels go to a private cache for the test session, never to ~/.cache/ember. Set at
# import time so that even module-level builds in test files use it.
_CACHE = tempfile.mkdtemp(prefix="ember-test-cache-")
os.environ["EMBER_CACHE_DIR"] = _CACHE


@pytest.fixture(scope="session")
def ember_cache_dir() -> str:
    """The compile-cache directory of this test session."""
    return _CACHE


def pytest_unconfigure(config):
    import shutil

    shutil.rmtree(_CACHE, ignore_errors=True)
