"""The scenario's other hosts, as the tests on one host reach them."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import testinfra

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tools"))
from playbook_output import run_playbook  # noqa: E402

PROJECT = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", Path(__file__).parents[3]))
# The fleet CA's certificate, in the scenario's gateway_ca_dir on this control node (molecule.yml).
CA = Path.home() / ".cache" / "vllm-fleet" / "molecule-serve" / "mirror-ca.crt"


def other(host, name: str):
    inventory = os.environ.get("MOLECULE_INVENTORY_FILE") or host.backend.ansible_inventory
    return testinfra.get_host("ansible://%s" % name, ansible_inventory=inventory)


def address(host) -> str:
    facts = host.ansible("setup", "gather_subset=min,network", check=False)["ansible_facts"]
    return facts["ansible_default_ipv4"]["address"]


def playbook(name: str, *args: str) -> tuple[int, str, float]:
    """A playbook of the project on the scenario's fleet, as molecule's converge runs site.yml:
    (rc, what it printed, seconds)."""
    started = time.monotonic()
    rc, output = run_playbook(os.environ["MOLECULE_INVENTORY_FILE"], str(PROJECT / "playbooks" / name), *args,
                              cwd=PROJECT)
    return rc, output, time.monotonic() - started


def site(*args: str) -> tuple[int, str, float]:
    """playbooks/site.yml on the scenario's fleet."""
    return playbook("site.yml", *args)


def api(host, path: str, port: int = 9090):
    """GET a Prometheus (9090) or Alertmanager (9093) API path on the monitoring host, where
    they listen on loopback alone."""
    out = host.check_output("python3 -c %s", "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen("
                            "'http://127.0.0.1:%d%s', timeout=10).read().decode())" % (port, path))
    return json.loads(out)
