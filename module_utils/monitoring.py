"""What the monitoring host watches, checked before any host changes: the scrape targets
made from the inventory (file-based service discovery, one file per job) and the alert
thresholds.

Plain Python, no Ansible imports; ``library/monitoring_plan.py`` wraps it.  The vLLM
instances are found as the gateway finds them (``gateway.upstreams``): one rule for
where an instance is reached.  The facts the rules rely on (metric names, what each
exporter exposes) are in docs/monitoring.md.
"""
from __future__ import annotations

import re

from ansible.module_utils import host_paths
from ansible.module_utils.gateway import ADDRESS, GatewayError, endpoint, upstreams
from ansible.module_utils.vllm_args import flag_name

DURATION = re.compile(r"^([0-9]+(ms|s|m|h|d|w|y))+$")
URL = re.compile(r"^https?://[A-Za-z0-9.\[\]:_-]+(/\S*)?$")
# Alert thresholds: name -> (lowest, highest, what it is).  Ratios are 0-1.
THRESHOLDS = {
    "kv_cache_usage": (0.0, 1.0, "a ratio of the KV cache (vllm:kv_cache_usage_perc is 0-1)"),
    "requests_waiting": (1, 1 << 20, "a whole number of waiting requests"),
    "ttft_p99_seconds": (0.001, 3600.0, "seconds"),
    "failed_ratio": (0.0, 1.0, "a ratio of the finished requests"),
    "disk_free_ratio": (0.0, 1.0, "a ratio of the filesystem"),
    "gpu_temperature_celsius": (30, 120, "degrees Celsius"),
    "gpu_memory_used_ratio": (0.0, 1.0, "a ratio of the GPU's memory"),
    "certificate_days": (1, 3650, "a whole number of days"),
}
WHOLE = ("requests_waiting", "gpu_temperature_celsius", "certificate_days")


class MonitoringError(ValueError):
    """Each message (several are joined by '; ') starts with the variable it is about."""


def check(retention: str, storage_path: str, thresholds: dict, ports: dict | None = None,
          durations: dict | None = None, webhook_url: str = "") -> list:
    """The problems of the settings, each naming its variable (``durations``: variable
    name -> a Prometheus duration)."""
    problems = []
    for name, value in sorted((durations or {}).items()):
        if not DURATION.match(str(value)) or not re.search("[1-9]", str(value)):
            problems.append("%s: %r is not a Prometheus duration such as 30s, 5m or 2h" % (name, value))
    if webhook_url and not URL.match(str(webhook_url)):
        problems.append("monitoring_alertmanager_webhook_url: the value (not shown: a webhook URL often carries a "
                        "token) is not an http:// or https:// URL")
    for name, port in sorted((ports or {}).items()):
        if name != "health_path" and (isinstance(port, bool) or not isinstance(port, int)
                                      or not 1 <= port < 65536):
            problems.append("vllm_fleet_%s_exporter_port: %r is not a port (1-65535)" % (name, port))
    if not DURATION.match(str(retention)):
        problems.append("monitoring_retention_time: %r is not a Prometheus duration such as 15d or 12h" % retention)
    problems.extend(host_paths.problems({"monitoring_storage_path": storage_path}))
    for name, (low, high, what) in THRESHOLDS.items():
        value = thresholds.get(name)
        whole = isinstance(value, int) and not isinstance(value, bool)
        number = whole or isinstance(value, float)
        if not number or (name in WHOLE and not whole) or not low <= value <= high:
            problems.append("monitoring_alert_%s: %r is not %s from %s to %s" % (name, value, what, low, high))
    return problems


def _group(targets: list, labels: dict) -> dict:
    return {"targets": targets, "labels": labels}


def targets(groups: dict, addresses: dict, plans: dict, model: dict, ports: dict) -> dict:
    """job -> file_sd target groups.  ``groups``: the inventory's groups; ``addresses``:
    host -> its inventory address (``ansible_host``, empty for its name); ``plans``: host ->
    its preflight plan; ``model``: the fleet's ``endpoint``, ``repo`` and ``revision``;
    ``ports``: ``node``, ``nginx``, ``dcgm``, ``npu`` and the engines' ``health_path``; and
    ``gateway``, the gateways' TLS port, where the gateway's own run publishes its TLS
    endpoint (job ``gateway_tls``, probed for the certificate's expiry; empty without it)."""
    inference = groups.get("inference", [])
    found = upstreams(inference, [addresses.get(h) or "" for h in inference],
                      [(plans.get(h) or {}).get("instances", []) for h in inference])
    engines = [_group([u["server"]],
                      {"host": u["host"], "vllm_instance": u["instance"]}) for u in found]
    health = [_group(["http://%s%s" % (u["server"], ports["health_path"])],
                     {"host": u["host"], "vllm_instance": u["instance"]}) for u in found]
    every = sorted({h for members in groups.values() for h in members} - {"localhost"})
    def at(host: str, port: int) -> str:
        reached = addresses.get(host) or host
        if not ADDRESS.match(reached):
            raise GatewayError("ansible_host of %s: %r is not a host name or an IP address" % (host, reached))
        return endpoint(reached, port)

    nodes = [_group([at(h, ports["node"])],
                    {"host": h, "role": "inference" if h in inference else "service"}) for h in every]
    nginx = [_group([at(h, ports["nginx"])], {"host": h})
             for h in groups.get("gateways", [])]
    tls = [_group([at(h, ports["gateway"])], {"host": h})
           for h in groups.get("gateways", [])] if "gateway" in ports else []
    # The fleet's mirror answers for the pinned revision: what a host asks before it downloads.
    mirror = []
    if model.get("endpoint") and model.get("repo"):
        mirror = [_group(["%s/api/models/%s/revision/%s" % (model["endpoint"].rstrip("/"), model["repo"],
                                                            model.get("revision") or "main")],
                         {"mirror": model["endpoint"], "repo": model["repo"]})]
    # The accelerator exporters (role accelerator_exporter) on the hosts whose plan runs that engine.
    def on(engine: str, port: int) -> list:
        return [_group([at(h, port)], {"host": h})
                for h in inference if (plans.get(h) or {}).get("engine") == engine]
    return {"vllm": engines, "vllm_health": health, "node": nodes, "nginx": nginx, "gateway_tls": tls,
            "mirror": mirror, "dcgm": on("cuda", ports["dcgm"]), "npu": on("ascend", ports["npu"])}


def mount_of(mounts: list, path: str) -> str:
    """The mount point holding ``path``: the longest of ``mounts`` it lies under."""
    under = [m for m in mounts if path == m or path.startswith(m.rstrip("/") + "/")]
    return max(under, key=len) if under else "/"


def plan(retention: str, storage_path: str, thresholds: dict, groups: dict, addresses: dict, plans: dict,
         model: dict, ports: dict, mounts: dict | None = None, durations: dict | None = None,
         webhook_url: str = "") -> dict:
    """The targets, the checked thresholds and the filesystems that hold the model root on
    the inference hosts (``mounts``: host -> its mount points; ``model["root"]``);
    MonitoringError naming each bad variable."""
    problems = check(retention, storage_path, thresholds, ports, durations, webhook_url)
    if not groups.get("inference"):
        problems.append("inference: the group is empty; there is no engine to watch")
    for host in groups.get("inference", []):
        for instance in (plans.get(host) or {}).get("instances", []):
            if any(flag_name(k) == "disable-log-stats" and v for k, v in instance.get("args", {}).items()):
                problems.append("preflight_vllm_args: --disable-log-stats on %s/%s removes every vllm:* series "
                                "from /metrics, and the fleet has a monitoring host" % (host, instance["name"]))
    if problems:
        raise MonitoringError("; ".join(problems))
    found = targets(groups, addresses, plans, model, ports)
    root = model.get("root") or "/"
    model_mounts = sorted({mount_of((mounts or {}).get(h) or [], root) for h in groups["inference"]})
    return {"targets": found, "thresholds": dict(thresholds), "model_mounts": model_mounts,
            "counts": {job: len(entries) for job, entries in found.items()}}
