"""Every module in library/ documents itself: ansible-doc renders it, its EXAMPLES
are YAML, its options match its argument_spec, and it supports check mode."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
MODULES = sorted(p.stem for p in (ROOT / "library").glob("*.py"))


@pytest.mark.parametrize("name", MODULES)
def test_ansible_doc_renders(name):
    doc = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "ansible-doc"), "-M", "library", name],
        cwd=ROOT, capture_output=True, text=True, env=dict(os.environ, ANSIBLE_NOCOLOR="1"))
    assert doc.returncode == 0, doc.stderr
    assert "OPTIONS" in doc.stdout and "EXAMPLES" in doc.stdout and "RETURN VALUES" in doc.stdout


@pytest.mark.parametrize("name", MODULES)
def test_documentation_is_complete(name):
    source = (ROOT / "library" / f"{name}.py").read_text()
    namespace: dict = {}
    exec(compile(source.split("from ansible.module_utils")[0], name, "exec"), namespace)
    doc = yaml.safe_load(namespace["DOCUMENTATION"])
    assert doc["module"] == name
    assert doc["attributes"]["check_mode"]["support"] in ("full", "partial")
    assert isinstance(yaml.safe_load(namespace["EXAMPLES"]), list)
    assert isinstance(yaml.safe_load(namespace["RETURN"]), dict)
    assert "supports_check_mode=True" in source
