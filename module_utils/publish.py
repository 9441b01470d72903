"""What one host publishes about itself to the fleet's shared hosts, written by its own
run: its instances as the gateways' upstream servers, and its scrape targets per
Prometheus job.  One file per host on each gateway and each monitoring host, so that
``site.yml --limit new-host`` adds the host everywhere, and hosts of one batch never
edit the same file (docs/publishing.md).

Plain Python, no Ansible imports; ``library/host_entries.py`` wraps it.  Where an
instance is reached and what is scraped are ``gateway.upstreams`` and
``monitoring.targets`` applied to this host alone: one rule for the fleet and for one
host.
"""
from __future__ import annotations

from ansible.module_utils.gateway import upstreams
from ansible.module_utils.monitoring import targets

STATES = ("in", "out", "absent")
# The jobs a host's own targets belong to (the mirror's probe is the fleet's, written by
# the monitoring host itself).
JOBS = ("vllm", "vllm_health", "node", "nginx", "gateway_tls", "dcgm", "npu")


class PublishError(ValueError):
    """The message starts with the variable it is about."""


def instances_from_settings(settings: dict) -> list:
    """The instances as the plan has them (``name``, ``port``, ``args``) from the vLLM
    settings each runs with (name -> its configuration's settings): what served before a
    change, for a rollback."""
    return [{"name": name, "port": int((given or {}).get("port", 8000)), "args": dict(given or {})}
            for name, given in sorted((settings or {}).items())]


def entries(host: str, address: str, group_names: list, plan: dict | None, ports: dict,
            instances: list | None = None, state: str = "in") -> dict:
    """This host's ``upstreams`` (each with the ``server`` nginx is given) and its
    ``targets`` (job -> file_sd target groups, every job of JOBS, empty where the host has
    none).  ``instances`` replace the plan's (a rollback publishes what served before);
    ``state`` ``absent`` publishes nothing."""
    if state not in STATES:
        raise PublishError("state: %r is not one of %s" % (state, ", ".join(STATES)))
    plan = plan or {}
    if state == "absent":
        return {"state": state, "upstreams": [], "targets": {job: [] for job in JOBS}}
    planned = plan.get("instances", []) if instances is None else instances
    found = upstreams([host], [address], [planned])
    groups = {name: [host] for name in group_names or []}
    jobs = targets(groups, {host: address}, {host: dict(plan, instances=planned)}, {}, ports)
    return {"state": state, "upstreams": found, "targets": {job: jobs.get(job, []) for job in JOBS}}
