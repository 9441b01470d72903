#!/usr/bin/env python3
"""What one Ansible task costs on the fleet's hosts, for each connection setting tried.

A fresh fleet of N systemd containers (tools/fleet.py), then a playbook of K tasks that
change nothing (as most of a re-run of site.yml: a folder that exists, a package that is
installed, a file that matches, a read-only command), run as site.yml runs (become) once
per variant.  Prints the wall time, the seconds per task per host and the ratio to the
first variant.  The first run of each variant is a warm-up and is not counted.

    .venv/bin/python bench/ansible_overhead.py [--hosts N] [--tasks K] [--repeat R]

Results: bench/results/ansible-overhead/README.md.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import fleet  # noqa: E402

FLEET = "overhead"
# (name, environment): every variant starts from the project's ansible.cfg
VARIANTS = [
    ("pipelining off", {"ANSIBLE_PIPELINING": "0"}),
    ("pipelining on (ansible.cfg)", {}),
    ("pipelining on, strategy free", {"ANSIBLE_STRATEGY": "free"}),
]
TASK_KINDS = [
    "ansible.builtin.file: {path: /etc/vllm-fleet-bench, state: directory, mode: '0755'}",
    "ansible.builtin.apt: {name: ca-certificates, state: present}",
    "ansible.builtin.copy: {content: 'bench\\n', dest: /etc/vllm-fleet-bench/file, mode: '0644'}",
    "ansible.builtin.command: {cmd: 'true'}\n      changed_when: false",
]


def playbook(tasks: int) -> str:
    body = "".join("    - name: Task %d\n      %s\n" % (i, TASK_KINDS[i % len(TASK_KINDS)]) for i in range(tasks))
    return "- name: No-op tasks\n  hosts: all\n  become: true\n  gather_facts: false\n  tasks:\n" + body


def inventory(hosts: list[str]) -> str:
    lines = ["all:", "  vars:", "    ansible_connection: community.docker.docker", "  hosts:"]
    lines += ["    %s: {ansible_host: %s}" % (h, fleet.container_name(FLEET, h)) for h in hosts]
    return "\n".join(lines) + "\n"


def run(folder: Path, env: dict) -> float:
    started = time.monotonic()
    done = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(folder / "hosts.yml"),
                           str(folder / "noop.yml")], cwd=ROOT, capture_output=True, text=True,
                          env=dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), **env))
    if done.returncode:
        sys.exit(done.stdout[-3000:] + done.stderr[-3000:])
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=2)
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    hosts = ["h%d" % i for i in range(1, args.hosts + 1)]
    fleet.ensure_daemon()
    fleet.down(FLEET)
    fleet.up(FLEET, [(h, "bookworm") for h in hosts])
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            (folder / "hosts.yml").write_text(inventory(hosts))
            (folder / "noop.yml").write_text(playbook(args.tasks))
            rows = []
            for name, env in VARIANTS:
                run(folder, env)
                times = [run(folder, env) for _ in range(args.repeat)]
                rows.append((name, statistics.median(times), min(times), max(times)))
    finally:
        fleet.down(FLEET)
    print("%d hosts, %d tasks, median of %d runs (min-max)" % (args.hosts, args.tasks, args.repeat))
    print("| variant | wall s | s per task | ratio |\n|---|---|---|---|")
    for name, median, low, high in rows:
        print("| %s | %.1f (%.1f-%.1f) | %.2f | %.2f |" % (name, median, low, high, median / args.tasks,
                                                          median / rows[0][1]))


if __name__ == "__main__":
    main()
