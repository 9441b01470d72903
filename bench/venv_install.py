#!/usr/bin/env python3
"""How long the engine's venv takes to install from the wheelhouse on a host: pip
against uv, both offline from the same wheelhouse and both byte-compiling (as pip does by
default, and as role python_venv runs them), and whether the two venvs hold the same.

Runs on the hosts of a running local fleet (the demo's: `make demo` made the vLLM CPU
wheelhouse under ~/.cache/vllm-fleet/wheelhouse).  Each host gets a copy of the
wheelhouse and uv's wheel, then for each installer, on every host at once: a new venv,
the install of the wheelhouse's pinned packages, timed.  The venvs are then compared:
distributions and versions, and every file under the venv, byte for byte, outside
`*.dist-info/` (whose INSTALLER and RECORD name the installer) and `bin/` (whose
scripts' shebangs are written by the installer); byte-compiled files by name only (each
holds its source's modification time, which is the time of the install).  Both
installers install into the same path, one after the other, as the role does.

    .venv/bin/python bench/venv_install.py [--fleet demo] [--hosts node1,node2] [--repeat 1]

Results: bench/results/venv-install/README.md.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import fleet  # noqa: E402

UV = "uv==0.13.8"
WORK = "/var/tmp/venv-bench"
# Every file of the venv with its digest (outside bin/ and *.dist-info/), and its distributions.
INVENTORY = r"""
import hashlib, importlib.metadata as md, json, os, sys
root = sys.argv[1]
files = {}
for folder, dirs, names in os.walk(root):
    rel = os.path.relpath(folder, root)
    if rel.split(os.sep)[0] == "bin" or ".dist-info" in rel:
        continue
    for name in names:
        path = os.path.join(folder, name)
        if os.path.islink(path):
            files[os.path.relpath(path, root)] = "link:" + os.readlink(path)
        elif name.endswith(".pyc"):
            files[os.path.relpath(path, root)] = "pyc"
        else:
            with open(path, "rb") as f:
                files[os.path.relpath(path, root)] = hashlib.sha256(f.read()).hexdigest()
dists = sorted("%s==%s" % (d.metadata["Name"].lower().replace("_", "-"), d.version)
               for d in md.distributions(path=[p for p in sys.path if p.startswith(root)]))
print(json.dumps({"files": files, "dists": dists}))
"""


def sh(container: str, command: str) -> str:
    return subprocess.run(["docker", "exec", container, "bash", "-ec", command], check=True,
                          capture_output=True, text=True).stdout


def installers(wheelhouse: str, packages: list[str]) -> dict[str, str]:
    quoted = " ".join("'%s'" % p for p in packages)
    return {
        "pip": f"{WORK}/venv/bin/python -m pip install --quiet --no-cache-dir --disable-pip-version-check "
               f"--no-index --find-links {wheelhouse} {quoted}",
        "uv": f"{WORK}/uv-tool/bin/uv pip install --quiet --python {WORK}/venv/bin/python --no-config "
              f"--compile-bytecode --cache-dir {WORK}/uv-cache --offline --no-index --find-links {wheelhouse} {quoted}",
    }


def install(container: str, command: str) -> float:
    sh(container, f"rm -rf {WORK}/venv {WORK}/uv-cache && python3 -m venv {WORK}/venv")
    started = time.monotonic()
    sh(container, command)
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fleet", default="demo")
    parser.add_argument("--hosts", default="node1,node2")
    parser.add_argument("--wheelhouse", help="default: the vLLM CPU wheelhouse in the control node's cache")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    cache = Path.home() / ".cache/vllm-fleet/wheelhouse"
    wheelhouse = Path(args.wheelhouse) if args.wheelhouse else next(
        p for p in sorted(cache.iterdir()) if p.name.startswith("cpu-") and (p / ".complete").exists())
    packages = (wheelhouse / ".complete").read_text().split()
    containers = [fleet.container_name(args.fleet, h) for h in args.hosts.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                        "--platform", "manylinux_2_17_x86_64", "--dest", tmp, UV], check=True)
        for c in containers:
            sh(c, f"rm -rf {WORK} && mkdir -p {WORK}/wheels")
            subprocess.run(["docker", "cp", f"{wheelhouse}/.", f"{c}:{WORK}/wheels/"], check=True)
            subprocess.run(["docker", "cp", f"{tmp}/.", f"{c}:{WORK}/uv-wheel/"], check=True)
            sh(c, f"python3 -m venv {WORK}/tool && {WORK}/tool/bin/pip install --quiet --no-index "
                  f"--find-links {WORK}/uv-wheel --target {WORK}/uv-tool {UV}")
    commands = installers(f"{WORK}/wheels", packages)
    print(f"wheelhouse {wheelhouse.name}: {len(list(wheelhouse.glob('*.whl')))} wheels, "
          f"{sum(p.stat().st_size for p in wheelhouse.glob('*.whl')) / 2**20:.0f} MiB; hosts {', '.join(containers)}")
    sh(containers[0], f"cat > {WORK}/inventory.py <<'EOF'\n{INVENTORY}\nEOF")
    results: dict[tuple[int, str], list[float]] = {}
    seen = {}
    for concurrent_hosts in sorted({1, len(containers)}):
        for _ in range(args.repeat):
            for name, command in commands.items():
                hosts = containers[:concurrent_hosts]
                with concurrent.futures.ThreadPoolExecutor(len(hosts)) as pool:
                    walls = list(pool.map(lambda c, cmd=command: install(c, cmd), hosts))
                results.setdefault((concurrent_hosts, name), []).append(max(walls))
                seen[name] = json.loads(sh(containers[0], f"{WORK}/venv/bin/python {WORK}/inventory.py {WORK}/venv"))
    print(f"\n| hosts at once | installer | wall s (median of {args.repeat}, slowest host) | ratio to pip |")
    print("|---|---|---|---|")
    for (n, name), walls in sorted(results.items()):
        pip = statistics.median(results[(n, "pip")])
        print(f"| {n} | {name} | {statistics.median(walls):.1f} | {statistics.median(walls) / pip:.2f} |")
    pip, uv = seen["pip"], seen["uv"]
    differ = sorted(p for p in set(pip["files"]) | set(uv["files"]) if pip["files"].get(p) != uv["files"].get(p))
    print(f"\ndistributions: pip {len(pip['dists'])}, uv {len(uv['dists'])}, "
          f"{'the same names and versions' if pip['dists'] == uv['dists'] else 'DIFFERENT'}")
    print(f"files outside bin/ and *.dist-info/: pip {len(pip['files'])}, uv {len(uv['files'])}, "
          f"{len(differ)} differ" + "".join(f"\n  {p}: pip {pip['files'].get(p, '-')[:12]} uv "
                                            f"{uv['files'].get(p, '-')[:12]}" for p in differ[:20]))
    for c in containers:
        sh(c, f"rm -rf {WORK}")
    sys.exit(0 if pip["dists"] == uv["dists"] else 1)


if __name__ == "__main__":
    main()
