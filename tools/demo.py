#!/usr/bin/env python3
"""The README's main job: bring up the local demo fleet and converge it.

Stages print as they start and a timing table closes the run.  Re-running it
converges the same containers again (the second run reports changed=0).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FLEET = "demo"
HOSTS = "mirror,node1,node2"


def stage(name: str, argv: list[str], timings: list[tuple[str, float]]) -> None:
    print(f"\n=== {name}", flush=True)
    started = time.monotonic()
    result = subprocess.run(argv, cwd=ROOT)
    timings.append((name, time.monotonic() - started))
    if result.returncode != 0:
        report(timings)
        sys.exit(f"demo: stage '{name}' failed (exit {result.returncode})")


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
          [str(bindir / "ansible-playbook"), "-i", "inventories/demo", "playbooks/site.yml"],
          timings)
    report(timings)
    print(f"\nThe demo fleet is up: docker ps --filter label=org.vllm-fleet.fleet={FLEET}"
          "\nTear it down with: make demo-down")


if __name__ == "__main__":
    main()
