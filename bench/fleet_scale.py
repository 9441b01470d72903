#!/usr/bin/env python3
"""How converging the fleet grows with its size: N light inference hosts and one mirror,
reached over SSH as a real fleet's (tools/fleet.py: the fleet's key, the hosts' own host
keys), converged by playbooks/site.yml with the project's ansible.cfg.

For each N: a fresh fleet, a cold converge, then a no-op re-run (which must report
changed=0 on every host).  Each run's wall time, the control node's CPU seconds (the
playbook and every process it waited for: forks, ssh clients, local commands; the ssh
ControlPersist masters run detached and are not counted) and its peak memory (the sum of
the resident sets of the playbook's process tree, sampled every 0.2 s), printed as a table
with the ratio to N=1.  Then, on the largest fleet, the no-op re-run once more for each
Ansible setting tried (--variants).

"Light" hosts: the stages are preflight, os_tuning, the mirror and the model's delivery
from it (--tags); the engine's venv (a ~1 GB wheelhouse per host), the engines, the gateway
and monitoring are left out at every N, so that the curve measures Ansible and the
connection rather than this machine's two cores installing and starting vLLM.

    .venv/bin/python bench/fleet_scale.py [--sizes 1,4,8,16] [--variants all] [--mitogen DIR] [--keep]

Results: bench/results/fleet-scale/README.md.
"""
from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import fleet  # noqa: E402

FLEET = "scale"
TAGS = "preflight,os_tuning,mirror,model"
PAGE = os.sysconf("SC_PAGE_SIZE")
# (name, environment over the project's ansible.cfg), tried on the largest fleet's no-op re-run.
VARIANTS = [
    ("ansible.cfg as shipped", {}),
    ("pipelining off", {"ANSIBLE_PIPELINING": "0"}),
    ("forks 5", {"ANSIBLE_FORKS": "5"}),
    ("forks 20", {"ANSIBLE_FORKS": "20"}),
    ("strategy free", {"ANSIBLE_STRATEGY": "free"}),
    ("gathering implicit (every play gathers)", {"ANSIBLE_GATHERING": "implicit"}),
    ("ssh_args Ansible's default (-C, ControlPersist=60s)",
     {"ANSIBLE_SSH_ARGS": "-C -o ControlMaster=auto -o ControlPersist=60s"}),
    ("ControlPersist off", {"ANSIBLE_SSH_ARGS": "-o ControlMaster=no"}),
]


def write_inventory(folder: Path, hosts: list[str]) -> None:
    """The demo's settings, with this fleet's hosts and its own ssh_config."""
    config, _known = fleet.ssh_paths(FLEET)
    (folder / "group_vars").mkdir(parents=True, exist_ok=True)
    (folder / "group_vars/all.yml").write_text(fleet.demo_settings())
    inventory = {"all": {
        "vars": {"ansible_connection": "ansible.builtin.ssh", "ansible_user": "root",
                 "ansible_ssh_common_args": f"-F {config}"},
        "children": {"mirrors": {"hosts": {"mirror": {"ansible_host": fleet.container_name(FLEET, "mirror")}}},
                     "inference": {"hosts": {h: {"ansible_host": fleet.container_name(FLEET, h)} for h in hosts}}}}}
    (folder / "hosts.yml").write_text(yaml.safe_dump(inventory, sort_keys=False))


def tree_rss(root: int) -> int:
    """Resident bytes of a process and all its descendants."""
    children: dict[int, list[int]] = {}
    pages: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            fields = stat[stat.rindex(")") + 2:].split()
            children.setdefault(int(fields[1]), []).append(int(entry))
            pages[int(entry)] = int(fields[21])
        except (OSError, ValueError, IndexError):
            continue
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += pages.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total * PAGE


def converge(folder: Path, env: dict) -> dict:
    """One site.yml run: wall seconds, control-node CPU seconds, peak memory, changed counts."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    proc = subprocess.Popen([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(folder / "hosts.yml"),
                             "playbooks/site.yml", "--tags", TAGS], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), **env))
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.2):
            peak[0] = max(peak[0], tree_rss(proc.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    output = proc.communicate()[0]
    done.set()
    sampler.join()
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise RuntimeError(output[-4000:])
    changed = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\S+)\s+: ok=\d+\s+changed=(\d+)", output, re.M)}
    return {"wall": wall, "cpu": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            "peak_mib": peak[0] / 2 ** 20, "changed": changed,
            "tasks": len(re.findall(r"^TASK \[", output, re.M))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1,4,8,16")
    parser.add_argument("--variants", default="", help="the settings to try on the largest fleet's re-run: "
                        "'all', or a comma-separated list of their names' first words")
    parser.add_argument("--mitogen", metavar="DIR", help="also try Mitogen for Ansible from DIR (pip install "
                        "--target DIR mitogen)")
    parser.add_argument("--keep", action="store_true", help="leave the largest fleet running")
    args = parser.parse_args()
    sizes = [int(n) for n in args.sizes.split(",")]
    fleet.ensure_daemon()
    rows = []
    folder = Path(tempfile.mkdtemp(prefix="fleet-scale-"))
    try:
        for n in sizes:
            hosts = ["h%02d" % i for i in range(1, n + 1)]
            fleet.down(FLEET)
            fleet.up(FLEET, [(h, "bookworm") for h in ["mirror"] + hosts])
            write_inventory(folder, hosts)
            cold = converge(folder, {})
            noop = converge(folder, {})
            not_idempotent = {h: c for h, c in noop["changed"].items() if c}
            print(f"N={n}: cold {cold['wall']:.1f}s, no-op {noop['wall']:.1f}s"
                  + (f"; NOT IDEMPOTENT: {not_idempotent}" if not_idempotent else ", changed=0"), flush=True)
            rows.append((n, cold, noop))
        variants = []
        tried = VARIANTS + ([("Mitogen (mitogen_linear)", {
            "PYTHONPATH": args.mitogen, "ANSIBLE_STRATEGY": "mitogen_linear",
            "ANSIBLE_STRATEGY_PLUGINS": f"{args.mitogen}/ansible_mitogen/plugins/strategy"})] if args.mitogen else [])
        wanted = [w.strip() for w in args.variants.split(",") if w.strip()]
        for name, env in tried:
            if "all" in wanted or any(name.startswith(w) for w in wanted):
                try:
                    run = converge(folder, env)
                except RuntimeError as failed:
                    print(f"N={sizes[-1]} no-op, {name}: FAILED\n{failed}", flush=True)
                    continue
                variants.append((name, run))
                print(f"N={sizes[-1]} no-op, {name}: {run['wall']:.1f}s", flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        if not args.keep:
            fleet.down(FLEET)
    base_cold, base_noop = rows[0][1], rows[0][2]
    print(f"\nstages: {TAGS} (site.yml tags); one mirror host besides the N inference hosts")
    print("| N | cold wall s | ratio | cold CPU s | cold peak MiB | no-op wall s | ratio | no-op CPU s "
          "| no-op peak MiB | no-op changed |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n, cold, noop in rows:
        print(f"| {n} | {cold['wall']:.1f} | {cold['wall'] / base_cold['wall']:.2f} | {cold['cpu']:.1f} "
              f"| {cold['peak_mib']:.0f} | {noop['wall']:.1f} | {noop['wall'] / base_noop['wall']:.2f} "
              f"| {noop['cpu']:.1f} | {noop['peak_mib']:.0f} | {sum(noop['changed'].values())} |")
    if variants:
        first = variants[0][1]["wall"]
        print(f"\nno-op re-run of N={sizes[-1]}, one run each")
        print("| setting | wall s | ratio | CPU s | peak MiB | changed |\n|---|---|---|---|---|---|")
        for name, run in variants:
            print(f"| {name} | {run['wall']:.1f} | {run['wall'] / first:.2f} | {run['cpu']:.1f} "
                  f"| {run['peak_mib']:.0f} | {sum(run['changed'].values())} |")


if __name__ == "__main__":
    main()
