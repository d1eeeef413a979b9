"""Tests never write the user's real folders: not from a test, and not from a module-scoped
fixture, which pytest makes before a test's own home is set (conftest.py)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def module_data_dir() -> Path:
    from engine import paths

    return paths.data_dir()


def test_a_module_fixture_writes_to_a_home_of_the_tests_own(module_data_dir):
    assert module_data_dir.resolve().is_relative_to(Path(tempfile.gettempdir()).resolve()), module_data_dir
