#!/usr/bin/env python3
"""The README's main job: bring up the local demo fleet, converge it, and ask every
inference host a question through the official OpenAI client.

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


def ask(bindir: Path) -> list[str]:
    """One chat completion per inference host, made with the openai client."""
    import fleet
    from openai import OpenAI

    inventory = json.loads(subprocess.run(
        [str(bindir / "ansible-inventory"), "-i", INVENTORY, "--list"], cwd=ROOT,
        check=True, capture_output=True, text=True).stdout)
    lines = []
    for host in inventory["inference"]["hosts"]:
        hostvars = inventory["_meta"]["hostvars"][host]
        port = hostvars.get("preflight_port", 8000)
        url = f"http://{fleet.address(FLEET, host)}:{port}/v1"
        client = OpenAI(base_url=url, api_key=hostvars["vllm_service_api_key"], timeout=60)
        started = time.monotonic()
        reply = client.chat.completions.create(
            model=hostvars["vllm_fleet_served_model_name"], max_tokens=24,
            messages=[{"role": "user", "content": QUESTION}])
        took = time.monotonic() - started
        print(f"{host}: {url} ({hostvars['ansible_host']}:{port} on the fleet network)\n"
              f"  answer ({reply.usage.completion_tokens} tokens, {took:.2f}s, "
              f"finish={reply.choices[0].finish_reason}): {reply.choices[0].message.content!r}")
        lines.append(f"{host}  {url}")
    return lines


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
    print(f"\n=== ask each inference host through the openai client: {QUESTION!r}\n"
          "(the demo model has random weights: its answers are well-formed noise)", flush=True)
    started = time.monotonic()
    endpoints = ask(bindir)
    timings.append(("ask each host (openai client)", time.monotonic() - started))
    report(timings)
    print("\nOpenAI-compatible endpoints (API key: vllm_service_api_key in "
          f"{INVENTORY}/group_vars/all.yml):")
    print("\n".join("  " + line for line in endpoints))
    print(f"The demo fleet is up: docker ps --filter label=org.vllm-fleet.fleet={FLEET}"
          "\nTear it down with: make demo-down")


if __name__ == "__main__":
    main()
