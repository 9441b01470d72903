#!/usr/bin/env python3
"""Bare container to healthy OpenAI endpoint: site.yml on fresh demo-like fleets.

  bench/serve_startup.py 1 2     # a mirror + 1 inference host, then a mirror + 2

Each run boots fresh systemd containers (fleet "sbench"), converges playbooks/site.yml
with the demo fleet's settings and prints the wall time until every inference host
answered a chat completion (the vllm_service role checks that before it returns).
The Docker images and the control node's wheelhouse cache are reused, as for a
second server of a fleet.  Run it on an otherwise idle machine: the figures are
CPU-bound.
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import fleet  # noqa: E402

FLEET = "sbench"


def inventory(folder: Path, nodes: list[str]) -> Path:
    (folder / "group_vars").mkdir(parents=True)
    (folder / "group_vars" / "all.yml").write_text(fleet.demo_settings())
    hosts = "".join(f"        {n}:\n          ansible_host: {FLEET}-{n}\n" for n in nodes)
    (folder / "hosts.yml").write_text(
        "all:\n  vars:\n    ansible_connection: community.docker.docker\n    ansible_user: root\n"
        f"  children:\n    mirrors:\n      hosts:\n        mirror:\n          ansible_host: {FLEET}-mirror\n"
        f"    inference:\n      hosts:\n{hosts}")
    return folder


def run(count: int) -> dict:
    nodes = [f"node{i}" for i in range(1, count + 1)]
    fleet.down(FLEET)
    fleet.up(FLEET, [(name, "bookworm") for name in ["mirror", *nodes]])
    with tempfile.TemporaryDirectory() as tmp:
        inv = inventory(Path(tmp) / "inv", nodes)
        started = time.monotonic()
        out = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inv),
                              "playbooks/site.yml"], cwd=ROOT, capture_output=True, text=True)
        wall = time.monotonic() - started
    if out.returncode:
        sys.exit(out.stdout[-3000:])
    fleet.down(FLEET)
    return {"inference_hosts": count, "wall_s": round(wall, 1)}


def main() -> None:
    results = [run(int(n)) for n in sys.argv[1:] or ["1", "2"]]
    print(f"{'inference hosts':>15} {'bare -> healthy (s)':>20}")
    for r in results:
        print(f"{r['inference_hosts']:>15} {r['wall_s']:>20.1f}")
    if len(results) > 1:
        print(f"ratio {results[-1]['inference_hosts']} hosts / {results[0]['inference_hosts']}: "
              f"{results[-1]['wall_s'] / results[0]['wall_s']:.2f}")


if __name__ == "__main__":
    main()
