#!/usr/bin/env python3
"""Build a STAND-IN apt repository of NVIDIA driver packages for the nvidia_driver tests.

The real driver cannot be installed in a container (no GPU, no kernel module can be
loaded), so these packages only carry the names, versions and the
nvidia-persistenced / nvidia-fabricmanager units and STAND-IN daemons
(tools/nvidia_daemons.py) of the real ones; the role's
repository setup, holds, fabric-manager version matching and drift checks run
against them.  DCGM and dcgm-exporter likewise (role accelerator_exporter): the
stand-in dcgm-exporter takes the real one's --collectors FILE and --address ADDR:PORT,
both required (the real one defaults to the fleet's own port, so a dropped flag would
pass unseen), refuses a field that is not in NVIDIA's published default-counters.csv
(tests/fixtures/metrics/dcgm-exporter.names) and a type that is not a Prometheus one,
and serves each field of FILE on /metrics with made-up values and dcgm-exporter's
labels.  Every package says STAND-IN in its description.

  nvidia_standin.py DEST    # DEST/*.deb + DEST/Packages, usable as "[trusted=yes] file:DEST ./"
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import nvidia_daemons

# DCGM's fields as NVIDIA's default-counters.csv lists them, with their Prometheus types.
FIELDS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "metrics" / "dcgm-exporter.names"

DRIVER = "580.159.04"
# A newer branch in the same repository, as NVIDIA's has: what an install without the
# branch's pin takes (the metapackage depends on ">= version").
NEXT_BRANCH = "590.48.01"
PIN = "/etc/apt/preferences.d/nvidia-driver-pinning-580"
PACKAGES = [
    # NVIDIA's pinning package: holds the driver packages at the branch (STAND-IN: an apt
    # preferences file with that effect; the real file's wording is not copied here)
    ("nvidia-driver-pinning-580", DRIVER, None),
    ("nvidia-open", DRIVER, None),
    ("nvidia-driver", DRIVER, "nvidia-persistenced"),
    ("nvidia-open", NEXT_BRANCH, None),
    ("nvidia-driver", NEXT_BRANCH, "nvidia-persistenced"),
    ("nvidia-fabricmanager-580", DRIVER, "nvidia-fabricmanager"),
    # an older fabric manager, to make the driver/fabric-manager skew the role must refuse
    ("nvidia-fabricmanager-580", "580.142.00", "nvidia-fabricmanager"),
    ("datacenter-gpu-manager-4-core", "4.6.0", None),
    ("datacenter-gpu-manager-4-proprietary", "4.6.0", None),
    # the package's own unit, which the role stops for its own
    ("dcgm-exporter", "4.8.3", "dcgm-exporter"),
]
DCGM_COUNTERS = "/etc/dcgm-exporter/default-counters.csv"
# STAND-IN /usr/bin/dcgm-exporter: the flags and the exposition of the real one.
DCGM_EXPORTER = r"""#!/usr/bin/python3
# STAND-IN for NVIDIA's dcgm-exporter (vllm-fleet tests): no GPU, no DCGM; made-up values.
import argparse, http.server, socket, sys
KNOWN = @KNOWN@
parser = argparse.ArgumentParser(prog="dcgm-exporter")
parser.add_argument("-f", "--collectors", required=True)
parser.add_argument("-a", "--address", required=True)
args = parser.parse_args()
fields = []
for number, line in enumerate(open(args.collectors), 1):
    line = line.strip()
    if line and not line.startswith("#"):
        name, kind, help_text = [part.strip() for part in line.split(",", 2)]
        if kind not in ("gauge", "counter", "label"):
            sys.exit("%s:%d: %r is not a Prometheus metric type" % (args.collectors, number, kind))
        if name not in KNOWN:
            sys.exit("%s:%d: %s is not a DCGM field (STAND-IN: the fields of default-counters.csv)"
                     % (args.collectors, number, name))
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


def published_fields() -> dict:
    """{field: Prometheus type} of NVIDIA's default-counters.csv."""
    return dict(line.split() for line in FIELDS.read_text().splitlines() if line and not line.startswith("#"))


def dcgm_exporter() -> str:
    """The STAND-IN dcgm-exporter's script."""
    return DCGM_EXPORTER.replace("@KNOWN@", repr(published_fields()))


def package_files(name: str, version: str, unit: str | None) -> dict:
    """{path: (text, mode)} of a stand-in package."""
    if name == "nvidia-driver-pinning-580":
        return {PIN: ("Package: nvidia-open nvidia-driver cuda-drivers\nPin: version 580.*\n"
                      "Pin-Priority: 1000\n", 0o644)}
    if unit is None:
        return {}
    if unit != "dcgm-exporter":
        return nvidia_daemons.files(unit, version)
    return {
        "/usr/lib/systemd/system/dcgm-exporter.service": (
            "[Unit]\nDescription=STAND-IN dcgm-exporter (vllm-fleet tests)\n\n[Service]\n"
            "ExecStart=/usr/bin/dcgm-exporter --collectors %s --address :9400\n\n"
            "[Install]\nWantedBy=multi-user.target\n" % DCGM_COUNTERS, 0o644),
        "/usr/bin/dcgm-exporter": (dcgm_exporter(), 0o755),
        DCGM_COUNTERS: ("".join("%s, %s, %s\n" % (field, kind, field) for field, kind in published_fields().items()),
                        0o644),
    }


def relations(name: str, version: str) -> str:
    """The control fields that tie a package to the others, as NVIDIA's packages have them:
    nvidia-fabricmanager-BRANCH provides, replaces and conflicts with nvidia-fabricmanager
    (github.com/NVIDIA/apt-packaging-fabric-manager, debian/templates/control.in); the
    driver metapackage depends on the driver at its version or newer (NVIDIA's Debian
    metapackages depend on ">= version", which is why the branch needs its pin)."""
    if name.startswith("nvidia-fabricmanager-"):
        return "Provides: nvidia-fabricmanager\nReplaces: nvidia-fabricmanager\nConflicts: nvidia-fabricmanager\n"
    if name == "nvidia-open":
        return "Depends: nvidia-driver (>= %s)\n" % version
    return ""


def build(dest: Path, name: str, version: str, unit: str | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "DEBIAN").mkdir()
        (root / "DEBIAN" / "control").write_text(
            f"Package: {name}\nVersion: {version}-1\nArchitecture: all\n"
            "Maintainer: vllm-fleet tests <vllm-fleet@localhost>\n" + relations(name, version) +
            f"Description: STAND-IN for NVIDIA's {name} (vllm-fleet tests; no driver inside)\n")
        account = nvidia_daemons.user(unit or "")
        if account:
            (root / "DEBIAN" / "postinst").write_text(
                "#!/bin/sh\nset -e\ngetent passwd %s >/dev/null || %s\n"
                % (account, " ".join(nvidia_daemons.USERADD + [account])))
            (root / "DEBIAN" / "postinst").chmod(0o755)
        for path, (text, mode) in package_files(name, version, unit).items():
            target = root / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
            target.chmod(mode)
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
