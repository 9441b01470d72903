"""Every role documents its variables in meta/argument_specs.yml, and they agree with
defaults/main.yml (as prometheus.prometheus lints its roles); docs/roles/ is what
tools/role_docs.py writes from them."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ROLES = sorted(p.name for p in (ROOT / "roles").iterdir() if p.is_dir())
sys.path.insert(0, str(ROOT / "tools"))
import role_docs  # noqa: E402


def specs(role: str) -> dict:
    """The options of all entry points of the role, by name."""
    path = ROOT / "roles" / role / "meta" / "argument_specs.yml"
    options: dict = {}
    for entry in yaml.safe_load(path.read_text())["argument_specs"].values():
        options.update(entry.get("options") or {})
    return options


def defaults(role: str) -> dict:
    path = ROOT / "roles" / role / "defaults" / "main.yml"
    return (yaml.safe_load(path.read_text()) or {}) if path.exists() else {}


@pytest.mark.parametrize("role", ROLES)
def test_every_default_is_documented_and_every_optional_variable_has_a_default(role):
    options, values = specs(role), defaults(role)
    assert sorted(set(values) - set(options)) == [], "in defaults/main.yml, not in the argument specs"
    optional = {name for name, option in options.items() if not option.get("required")}
    assert sorted(optional - set(values)) == [], "optional in the argument specs, no default in defaults/main.yml"
    assert all(name.startswith(role + "_") for name in options), "variables carry the role's prefix"


@pytest.mark.parametrize("role", ROLES)
def test_the_documented_defaults_are_the_real_ones(role):
    options, values = specs(role), defaults(role)
    literal = {name: value for name, value in values.items() if "{{" not in str(value)}
    assert {name: options[name].get("default") for name in literal} == literal


@pytest.mark.parametrize("role", ROLES)
def test_the_role_page_is_generated_from_the_specs(role):
    page = ROOT / "docs" / "roles" / ("%s.md" % role)
    assert page.read_text() == role_docs.render(role), "run: python3 tools/role_docs.py"
