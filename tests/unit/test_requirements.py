"""Every collection requirements.yml names is installed (from the pinned `ansible`
package) at a version that satisfies it: Galaxy is not reachable, so nothing may
depend on downloading a collection."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from packaging.specifiers import SpecifierSet
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
REQUIRED = yaml.safe_load((ROOT / "requirements.yml").read_text())["collections"]


@pytest.fixture(scope="module")
def installed() -> dict[str, str]:
    galaxy = Path(sys.executable).with_name("ansible-galaxy")
    out = subprocess.run([str(galaxy), "collection", "list", "--format", "json"],
                         check=True, capture_output=True, text=True).stdout
    found: dict[str, str] = {}
    for collections in json.loads(out).values():  # one dict per collections path
        for name, info in collections.items():
            found.setdefault(name, info["version"])
    return found


@pytest.mark.parametrize("req", REQUIRED, ids=[r["name"] for r in REQUIRED])
def test_collection_installed_at_a_satisfying_version(installed, req):
    assert req["name"] in installed, f"{req['name']} is not installed"
    assert Version(installed[req["name"]]) in SpecifierSet(req["version"]), (
        f"{req['name']} {installed[req['name']]} does not satisfy {req['version']}")


def test_code_uses_no_collection_missing_from_requirements():
    used = set()
    for path in ROOT.glob("**/*.yml"):
        if ".venv" in path.parts or ".git" in path.parts:
            continue
        for word in path.read_text().split():
            parts = word.strip(":\"'").split(".")
            if len(parts) == 3 and parts[0] in {"community", "ansible", "containers"} and parts[1] != "builtin":
                used.add(".".join(parts[:2]))
    assert used <= {r["name"] for r in REQUIRED}, used - {r["name"] for r in REQUIRED}
