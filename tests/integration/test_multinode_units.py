"""One engine over a serving group: the units vllm_service renders for its head and its
worker from the planner's own plans (Gemma-4-31B in BF16 on hosts of one 48 GiB card), by
Ansible from the role's template, variables and defaults, and the worker's --config file."""
from __future__ import annotations

import configparser
import json
import sys
from pathlib import Path

import yaml
from ansible.module_utils.vllm_config import render
from ansible.module_utils.vllm_planner import plan

ROOT = Path(__file__).resolve().parents[2]
ROLE = ROOT / "roles" / "vllm_service"
BF16 = json.loads((ROOT / "roles/preflight/files/models/gemma-4-31B-it.json").read_text())
L40S = [{"name": "NVIDIA L40S", "memory_total_bytes": 48 * 1024 ** 3, "compute_capability": "8.9"}]
VENV = "/opt/vllm/cuda-0.25.1"
GROUP = ["l40s-a", "l40s-b", "solo"]


def unit(text: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str
    parser.read_string(text)
    return parser


def test_the_head_serves_and_waits_for_health_the_worker_runs_vllm_serve_headless(playbook, tmp_path):
    plans = {name: plan(BF16, L40S, max_model_len=8192, nodes=2, interconnect="roce", node_rank=rank,
                        master_addr="10.0.0.1", engine_version="0.25.1")
             for rank, name in enumerate(GROUP[:2])}
    plans["solo"] = plan(BF16, [dict(L40S[0], memory_total_bytes=150754820096)], max_model_len=8192,
                         engine_version="0.25.1")
    host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
            "vllm_runtime_venv": VENV, "vllm_fleet_engine": "cuda"}
    # behind a gateway (its address, admitted by tasks/firewall_callers.yml in a real run)
    host["_vllm_service_admitted"] = {"allow": ["localhost", "10.0.0.9"], "addresses": ["10.0.0.9"]}
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"gateways": {"hosts": {"gw": {}}}, "inference": {"hosts": {
        name: dict(host, preflight_plan=plans[name],
                   preflight_serving_group=GROUP[:2] if name != "solo" else []) for name in GROUP}}}}}))
    book = tmp_path / "render.yml"
    book.write_text(yaml.safe_dump([{
        "name": "Render the units", "hosts": "inference", "gather_facts": False,
        "vars_files": [str(ROLE / "defaults/main.yml"), str(ROLE / "vars/main.yml")],
        "tasks": [{"name": "Render the unit", "ansible.builtin.template": {
            "src": str(ROLE / "templates/vllm@.service.j2"), "dest": str(tmp_path / "{{ inventory_hostname }}.service"),
            "mode": "0644"}, "delegate_to": "localhost"}]}]))
    run = playbook(book, inventory, extra_vars={"vllm_service_stop_grace": 3})
    assert run.rc == 0, run.stderr
    texts = {name: (tmp_path / f"{name}.service").read_text() for name in GROUP}
    head, worker, solo = (unit(texts[name]) for name in GROUP)

    assert worker["Service"]["ExecStart"] == f"{VENV}/bin/vllm serve --config /etc/vllm/%i.yaml"
    assert "ExecStartPost" not in worker["Service"]
    assert worker["Unit"]["Description"] == "vLLM headless worker (%i) of the serving group led by l40s-a"
    for served in (head, solo):
        assert served["Service"]["ExecStart"] == (
            f"{VENV}/bin/python -m vllm.entrypoints.openai.api_server --config /etc/vllm/%i.yaml")
        assert served["Service"]["ExecStartPost"].startswith(f"{VENV}/bin/python /usr/local/lib/vllm-fleet/vllm_probe.py")
    # a stop refuses new connections at the port, waits, then signals; the port opens once stopped
    for name in ("l40s-a", "solo"):
        stops = [line for line in texts[name].splitlines() if line.startswith(("ExecStop=", "ExecStopPost="))]
        assert stops == ["ExecStop=-+/usr/sbin/nft add element inet vllm_fleet draining { ${FLEET_PORT} }",
                         "ExecStop=/bin/sleep 3",
                         "ExecStopPost=-+/usr/sbin/nft delete element inet vllm_fleet draining { ${FLEET_PORT} }"], name
    assert "ExecStop" not in texts["l40s-b"]  # a worker has no port of its own
    # the same hardening and graceful stop on every host
    for key in ("KillMode", "TimeoutStopSec", "ProtectSystem", "SystemCallFilter", "User"):
        assert head["Service"][key] == worker["Service"][key] == solo["Service"][key], key

    config = render(dict(plans["l40s-b"]["instances"][0]["args"], model="/var/lib/vllm/models/x"))
    lines = set(config.splitlines())
    assert {"headless: true", "nnodes: 2", "node-rank: 1", 'master-addr: "10.0.0.1"',
            "pipeline-parallel-size: 2"} <= lines
    assert "headless: true" not in render(plans["l40s-a"]["instances"][0]["args"])
