#!/usr/bin/env python3
"""Build a STAND-IN apt repository of NVIDIA driver packages for the nvidia_driver tests.

The real driver cannot be installed in a container (no GPU, no kernel module can be
loaded), so these packages only carry the names, versions and the
nvidia-persistenced / nvidia-fabricmanager units of the real ones; the role's
repository setup, holds, fabric-manager version matching and drift checks run
against them.  DCGM and dcgm-exporter likewise (role accelerator_exporter): the
stand-in dcgm-exporter takes the real one's --collectors FILE and --address ADDR:PORT
and serves each field of FILE on /metrics with made-up values and dcgm-exporter's
labels.  Every package says STAND-IN in its description.

  nvidia_standin.py DEST    # DEST/*.deb + DEST/Packages, usable as "[trusted=yes] file:DEST ./"
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

DRIVER = "580.159.04"
PACKAGES = [
    ("nvidia-driver-580-open", DRIVER, "nvidia-persistenced",
     "/usr/bin/sleep infinity"),
    ("nvidia-fabricmanager-580", DRIVER, "nvidia-fabricmanager", "/usr/bin/sleep infinity"),
    # an older fabric manager, to make the driver/fabric-manager skew the role must refuse
    ("nvidia-fabricmanager-580", "580.142.00", "nvidia-fabricmanager", "/usr/bin/sleep infinity"),
    ("datacenter-gpu-manager-4-core", "4.6.0", None, None),
    ("datacenter-gpu-manager-4-proprietary", "4.6.0", None, None),
    # the package's own unit, which the role stops for its own
    ("dcgm-exporter", "4.8.3", "dcgm-exporter", "/usr/bin/dcgm-exporter"),
]
# STAND-IN /usr/bin/dcgm-exporter: the flags and the exposition of the real one.
DCGM_EXPORTER = r"""#!/usr/bin/python3
# STAND-IN for NVIDIA's dcgm-exporter (vllm-fleet tests): no GPU, no DCGM; made-up values.
import argparse, http.server, socket
parser = argparse.ArgumentParser()
parser.add_argument("-f", "--collectors", default="/etc/dcgm-exporter/default-counters.csv")
parser.add_argument("-a", "--address", default=":9400")
args = parser.parse_args()
fields = []
for line in open(args.collectors):
    line = line.strip()
    if line and not line.startswith("#"):
        name, kind, help_text = [part.strip() for part in line.split(",", 2)]
        fields.append((name, kind, help_text))
labels = 'gpu="0",UUID="GPU-00000000-0000-0000-0000-000000000000",pci_bus_id="00000000:19:00.0",' \
         'device="nvidia0",modelName="NVIDIA H200",Hostname="%s"' % socket.gethostname()
body = "".join("# HELP %s %s\n# TYPE %s %s\n%s{%s} %d\n" % (n, h, n, k, n, labels, 0 if "XID" in n else 42)
               for n, k, h in fields).encode()
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/metrics" else 404)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(body if self.path == "/metrics" else b"")
    def log_message(self, *a):
        pass
host, _, port = args.address.rpartition(":")
http.server.HTTPServer((host, int(port)), Handler).serve_forever()
"""


def build(dest: Path, name: str, version: str, unit: str | None, command: str | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "DEBIAN").mkdir()
        (root / "DEBIAN" / "control").write_text(
            f"Package: {name}\nVersion: {version}-1\nArchitecture: all\n"
            "Maintainer: vllm-fleet tests <vllm-fleet@localhost>\n"
            f"Description: STAND-IN for NVIDIA's {name} (vllm-fleet tests; no driver inside)\n")
        if unit:
            units = root / "usr" / "lib" / "systemd" / "system"
            units.mkdir(parents=True)
            (units / f"{unit}.service").write_text(
                f"[Unit]\nDescription=STAND-IN {unit} (vllm-fleet tests)\n\n"
                f"[Service]\nExecStart={command}\n\n[Install]\nWantedBy=multi-user.target\n")
        if name == "dcgm-exporter":
            (root / "usr" / "bin").mkdir(parents=True)
            (root / "usr" / "bin" / "dcgm-exporter").write_text(DCGM_EXPORTER)
            (root / "usr" / "bin" / "dcgm-exporter").chmod(0o755)
        subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(root),
                        str(dest / f"{name}_{version}-1_all.deb")], check=True, capture_output=True)


def main() -> None:
    dest = Path(sys.argv[1])
    dest.mkdir(parents=True, exist_ok=True)
    for package in PACKAGES:
        build(dest, *package)
    index = subprocess.run(["dpkg-scanpackages", "--multiversion", "."], cwd=dest, check=True,
                           capture_output=True, text=True).stdout
    (dest / "Packages").write_text(index)
    print(f"stand-in repository: {dest} ({len(PACKAGES)} packages)")


if __name__ == "__main__":
    main()
