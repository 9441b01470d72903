#!/usr/bin/env python3
"""Model delivery through one fleet mirror, for N = 1, 2, 4 inference hosts.

For each mode and N: a fresh fleet (one mirror + N hosts, systemd containers), then
`site.yml --tags mirror,model`.  Prints the bytes that entered the fleet from upstream,
the bytes the mirror served (its access log: every resolve request times the file's
size), the bytes that landed on the hosts (verified snapshots), and the wall time.

- offline: the model is published into the mirror as a git repository; it enters the
  fleet once, at publish time.
- proxy: the mirror caches an upstream hub.  No real hub is reachable from these
  machines, so the upstream is tools/hub_standin.py (a labelled stand-in for the Hub's
  HTTP interface) in an extra container; it counts the bytes it sends.

    .venv/bin/python bench/model_delivery.py [--mode offline|proxy] [N ...]
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
sys.path.insert(0, str(ROOT / "tests" / "integration"))
import fleet  # noqa: E402
from olah_helpers import publish_git  # noqa: E402

MODEL = ROOT / "tests" / "fixtures" / "models" / "tiny-gemma4"
FLEET = "bench"
BASE = "/var/lib/vllm/models/demo/tiny-gemma4"


def docker(*argv: str) -> str:
    return subprocess.run(["docker", *argv], check=True, capture_output=True, text=True).stdout


def start_upstream() -> str:
    """Boot the stand-in hub with the tiny model as a git repository; return its sha."""
    with tempfile.TemporaryDirectory() as tmp:
        sha = publish_git(MODEL, Path(tmp, "demo", "tiny-gemma4"))
        docker("exec", f"{FLEET}-upstream", "sh", "-c", "apt-get update -qq && apt-get install -y -qq git")
        docker("cp", f"{tmp}/.", f"{FLEET}-upstream:/srv/hub")
    docker("cp", str(ROOT / "tools" / "hub_standin.py"), f"{FLEET}-upstream:/usr/local/bin/hub_standin.py")
    docker("exec", "-d", f"{FLEET}-upstream", "python3", "/usr/local/bin/hub_standin.py", "/srv/hub",
           "--host", "0.0.0.0", "--port", "8099")
    time.sleep(2)
    return sha


def upstream_bytes() -> int:
    return json.loads(docker("exec", f"{FLEET}-upstream", "curl", "-s",
                             "http://127.0.0.1:8099/_standin/bytes"))["bytes"]


def run_once(mode: str, n: int) -> dict:
    fleet.down(FLEET)
    hosts = [("mirror", "bookworm")] + [(f"node{i}", "bookworm") for i in range(1, n + 1)]
    fleet.up(FLEET, hosts + ([("upstream", "bookworm")] if mode == "proxy" else []))
    revision = start_upstream() if mode == "proxy" else "115893f75ee34252aa70c6877eb37a13cc541e38"
    inventory = {"all": {"vars": {"ansible_connection": "community.docker.docker"}, "children": {
        "mirrors": {"hosts": {"mirror": {"ansible_host": f"{FLEET}-mirror"}}},
        "inference": {"hosts": {f"node{i}": {"ansible_host": f"{FLEET}-node{i}"} for i in range(1, n + 1)}}}}}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "hosts.json")
        path.write_text(json.dumps(inventory))
        extra = {"vllm_fleet_engine": "cpu", "preflight_model": "tiny-gemma4", "preflight_max_model_len": 1024,
                 "hf_mirror_mode": mode, "vllm_fleet_model_repo": "demo/tiny-gemma4",
                 "vllm_fleet_model_revision": revision, "vllm_fleet_model_endpoint": f"http://{FLEET}-mirror:8090"}
        if mode == "proxy":
            extra.update(hf_mirror_upstream_scheme="http", hf_mirror_upstream_netloc=f"{FLEET}-upstream:8099",
                         hf_mirror_upstream_lfs_netloc=f"{FLEET}-upstream:8099")
        else:
            extra["hf_mirror_publish"] = [{"repo": "demo/tiny-gemma4", "src": str(MODEL)}]
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
    into_fleet = upstream_bytes() if mode == "proxy" else sum(sizes.values())
    return {"mode": mode, "hosts": n, "upstream_bytes": into_fleet, "served_bytes": served,
            "delivered_bytes": delivered, "wall_s": round(wall, 1)}


def main(argv: list[str]) -> None:
    modes = ["offline", "proxy"]
    if argv[:1] == ["--mode"]:
        modes, argv = [argv[1]], argv[2:]
    rows = [run_once(mode, n) for mode in modes for n in ([int(a) for a in argv] or [1, 2, 4])]
    fleet.down(FLEET)
    print(f"{'mode':<8} {'N':>2} {'upstream bytes':>15} {'mirror served':>14} {'on hosts':>10} {'wall s':>7}")
    for r in rows:
        print(f"{r['mode']:<8} {r['hosts']:>2} {r['upstream_bytes']:>15,} {r['served_bytes']:>14,} "
              f"{r['delivered_bytes']:>10,} {r['wall_s']:>7}")
    print(json.dumps(rows))


if __name__ == "__main__":
    main(sys.argv[1:])
