#!/usr/bin/env python3
"""Model delivery through one fleet mirror, for N = 1, 2, 4 inference hosts.

For each N: a fresh fleet (one mirror + N hosts, systemd containers), then
`site.yml --tags mirror,model`.  Prints, per N: the bytes that entered the fleet
(the model published into the mirror, once), the bytes the mirror served (its access
log: every resolve request times the file's size), the bytes that landed on the
hosts (verified snapshots), and the wall time.

The mirror runs in offline mode here: these machines reach no Hugging Face hub, so a
proxy-mode upstream cannot be measured; in offline mode the model crosses into the
fleet exactly once, at publish time, whatever N.

    .venv/bin/python bench/model_delivery.py [N ...]
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import fleet  # noqa: E402

MODEL = ROOT / "tests" / "fixtures" / "models" / "tiny-gemma4"
FLEET = "bench"
BASE = "/var/lib/vllm/models/demo/tiny-gemma4"


def docker(*argv: str) -> str:
    return subprocess.run(["docker", *argv], check=True, capture_output=True, text=True).stdout


def run_once(n: int) -> dict:
    fleet.down(FLEET)
    hosts = [("mirror", "bookworm")] + [(f"node{i}", "bookworm") for i in range(1, n + 1)]
    fleet.up(FLEET, hosts)
    inventory = {"all": {"vars": {"ansible_connection": "community.docker.docker"}, "children": {
        "mirrors": {"hosts": {"mirror": {"ansible_host": f"{FLEET}-mirror"}}},
        "inference": {"hosts": {f"node{i}": {"ansible_host": f"{FLEET}-node{i}"} for i in range(1, n + 1)}}}}}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "hosts.json")
        path.write_text(json.dumps(inventory))
        extra = {"vllm_fleet_engine": "cpu", "preflight_model": "tiny-gemma4", "preflight_max_model_len": 1024,
                 "hf_mirror_publish": [{"repo": "demo/tiny-gemma4", "src": str(MODEL)}],
                 "vllm_model_repo": "demo/tiny-gemma4",
                 "vllm_model_revision": "115893f75ee34252aa70c6877eb37a13cc541e38",
                 "vllm_model_hf_endpoint": f"http://{FLEET}-mirror:8090"}
        Path(tmp, "vars.json").write_text(json.dumps(extra))
        started = time.monotonic()
        subprocess.run([str(Path(sys.executable).with_name("ansible-playbook")), "-i", str(path),
                        "-e", f"@{tmp}/vars.json", "--tags", "mirror,model", "playbooks/site.yml"],
                       cwd=ROOT, check=True, stdout=subprocess.DEVNULL,
                       env=dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg")))
        wall = time.monotonic() - started
    sizes = {p.name: p.stat().st_size for p in MODEL.iterdir()}
    log = docker("exec", f"{FLEET}-mirror", "journalctl", "-u", "olah", "--no-pager", "-o", "cat")
    served = sum(sizes.get(m.group(1), 0) for m in re.finditer(r'"GET /demo/tiny-gemma4/resolve/\w+/(\S+) HTTP/1.1" 200', log))
    delivered = sum(int(docker("exec", f"{FLEET}-node{i}", "du", "-sbL", f"{BASE}/current").split()[0])
                    for i in range(1, n + 1))
    return {"hosts": n, "published_bytes": sum(sizes.values()), "served_bytes": served,
            "delivered_bytes": delivered, "wall_s": round(wall, 1)}


def main(counts: list[int]) -> None:
    rows = [run_once(n) for n in counts]
    fleet.down(FLEET)
    print(f"{'N':>2} {'into fleet (bytes)':>19} {'mirror served':>14} {'on hosts':>10} {'wall s':>7}")
    for r in rows:
        print(f"{r['hosts']:>2} {r['published_bytes']:>19,} {r['served_bytes']:>14,} "
              f"{r['delivered_bytes']:>10,} {r['wall_s']:>7}")
    print(json.dumps(rows))


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [1, 2, 4])
