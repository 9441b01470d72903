"""The scenario's other hosts, as the tests on one host reach them."""
from __future__ import annotations

import os

import testinfra


def other(host, name: str):
    inventory = os.environ.get("MOLECULE_INVENTORY_FILE") or host.backend.ansible_inventory
    return testinfra.get_host("ansible://%s" % name, ansible_inventory=inventory)


def address(host) -> str:
    facts = host.ansible("setup", "gather_subset=min,network", check=False)["ansible_facts"]
    return facts["ansible_default_ipv4"]["address"]
