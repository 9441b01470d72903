"""Test helpers: make the project's module_utils importable the way Ansible does and
run a module from library/ in-process with ``patch_module_args``."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import ansible.module_utils
import pytest
from ansible.module_utils.testing import patch_module_args

ROOT = Path(__file__).resolve().parent.parent
# `from ansible.module_utils.<name> import …` in library/ finds module_utils/<name>.py.
ansible.module_utils.__path__.append(str(ROOT / "module_utils"))


def load_module(name: str):
    spec = importlib.util.spec_from_file_location(f"library_{name}", ROOT / "library" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def run_module(capsys):
    """``run_module("name", {args}, check_mode=False)`` -> the module's JSON result."""

    def _run(name: str, args: dict, check_mode: bool = False, diff: bool = False) -> dict:
        module = load_module(name)
        args = dict(args, _ansible_check_mode=check_mode, _ansible_diff=diff)
        with patch_module_args(args), pytest.raises(SystemExit):
            module.main()
        return json.loads(capsys.readouterr().out)

    return _run


@pytest.fixture
def root() -> Path:
    return ROOT


sys.path.insert(0, str(ROOT / "tools"))


def pytest_addoption(parser):
    parser.addoption("--reverse", action="store_true",
                     help="run the collected tests in reverse order (make unit: each file alone, reversed)")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--reverse"):
        items.reverse()
