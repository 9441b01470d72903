"""The scenario's other hosts, as the tests on one host reach them."""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import testinfra

PROJECT = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", Path(__file__).parents[3]))


def other(host, name: str):
    inventory = os.environ.get("MOLECULE_INVENTORY_FILE") or host.backend.ansible_inventory
    return testinfra.get_host("ansible://%s" % name, ansible_inventory=inventory)


def address(host) -> str:
    facts = host.ansible("setup", "gather_subset=min,network", check=False)["ansible_facts"]
    return facts["ansible_default_ipv4"]["address"]


def site(*args: str) -> tuple[int, str, float]:
    """playbooks/site.yml on the scenario's fleet, as molecule's converge runs it."""
    inventory = os.environ["MOLECULE_INVENTORY_FILE"]
    started = time.monotonic()
    run = subprocess.run([shutil.which("ansible-playbook") or "ansible-playbook", "-i", inventory,
                          str(PROJECT / "playbooks" / "site.yml"), *args],
                         cwd=PROJECT, capture_output=True, text=True,
                         env=dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_STDOUT_CALLBACK="default",
                                  ANSIBLE_CALLBACK_RESULT_FORMAT="json"))
    return run.returncode, run.stdout + run.stderr, time.monotonic() - started
