#!/usr/bin/env python3
"""The README's main job: bring up the local demo fleet, converge it, and ask its
gateway a question through the official OpenAI client, once per inference instance,
verifying TLS against the fleet CA.

Stages print as they start and a timing table closes the run.  Re-running it
converges the same containers again (the second run reports changed=0).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FLEET = "demo"
HOSTS = "mirror,node1,node2"
INVENTORY = "inventories/demo"
QUESTION = "Which GPU does Gemma-4-31B run on in FP8?"


def stage(name: str, argv: list[str], timings: list[tuple[str, float]]) -> None:
    print(f"\n=== {name}", flush=True)
    started = time.monotonic()
    result = subprocess.run(argv, cwd=ROOT)
    timings.append((name, time.monotonic() - started))
    if result.returncode != 0:
        report(timings)
        sys.exit(f"demo: stage '{name}' failed (exit {result.returncode})")


def ask(bindir: Path) -> tuple[str, str]:
    """Chat completions through the gateway, one per inference host (least connections
    spreads them), with the openai client verifying TLS against the fleet CA."""
    import fleet
    import httpx
    from openai import OpenAI

    inventory = json.loads(subprocess.run(
        [str(bindir / "ansible-inventory"), "-i", INVENTORY, "--list"], cwd=ROOT,
        check=True, capture_output=True, text=True).stdout)
    gateway = inventory["gateways"]["hosts"][0]
    hostvars = inventory["_meta"]["hostvars"][gateway]
    url = f"https://{fleet.address(FLEET, gateway)}:{hostvars.get('gateway_port', 443)}/v1"
    ca = Path.home() / ".local" / "share" / "vllm-fleet" / "gateway-ca" / f"{gateway}-ca.crt"
    client_name = hostvars["gateway_clients"][0]["name"]
    client = OpenAI(base_url=url, api_key=hostvars["gateway_clients"][0]["key"], timeout=60,
                    http_client=httpx.Client(verify=str(ca)))
    for _host in inventory["inference"]["hosts"]:
        started = time.monotonic()
        reply = client.chat.completions.create(
            model=hostvars["vllm_fleet_served_model_name"], max_tokens=24,
            messages=[{"role": "user", "content": QUESTION}])
        took = time.monotonic() - started
        print(f"{url} (client {client_name}): answer ({reply.usage.completion_tokens} tokens, "
              f"{took:.2f}s, finish={reply.choices[0].finish_reason}): {reply.choices[0].message.content!r}")
    return url, str(ca)


def report(timings: list[tuple[str, float]]) -> None:
    print("\nstage timings")
    for name, seconds in timings:
        print(f"  {name:<40} {seconds:7.1f}s")
    print(f"  {'total':<40} {sum(s for _n, s in timings):7.1f}s")


def main() -> None:
    os.environ.setdefault("ANSIBLE_CONFIG", str(ROOT / "ansible.cfg"))
    bindir = Path(sys.executable).parent
    timings: list[tuple[str, float]] = []
    stage("boot the demo hosts (systemd containers)",
          [sys.executable, "tools/fleet.py", "up", FLEET, "--hosts", HOSTS], timings)
    stage("converge playbooks/site.yml",
          [str(bindir / "ansible-playbook"), "-i", INVENTORY, "playbooks/site.yml"], timings)
    print(f"\n=== ask the gateway through the openai client, once per inference host: {QUESTION!r}\n"
          "(the demo model has random weights: its answers are well-formed noise)", flush=True)
    started = time.monotonic()
    url, ca = ask(bindir)
    timings.append(("ask through the gateway (openai client)", time.monotonic() - started))
    stage("what the fleet's Prometheus sees (playbooks/fleet_status.yml)",
          [str(bindir / "ansible-playbook"), "-i", INVENTORY, "playbooks/fleet_status.yml"], timings)
    report(timings)
    print(f"\nThe fleet's OpenAI-compatible endpoint: {url}\n"
          f"  client key: gateway_clients in {INVENTORY}/group_vars/all.yml\n"
          f"  TLS: verify with the fleet CA {ca}\n"
          "  the engines answer the gateway alone (their ports refuse every other host)\n"
          f"Prometheus http://127.0.0.1:9090 and Alertmanager http://127.0.0.1:9093 watch the fleet from the "
          f"mirror (its loopback): docker exec {FLEET}-mirror curl -s 127.0.0.1:9090/api/v1/targets")
    print(f"The demo fleet is up: docker ps --filter label=org.vllm-fleet.fleet={FLEET}"
          "\nTear it down with: make demo-down")


if __name__ == "__main__":
    main()
