#!/usr/bin/env python3
"""Build a STAND-IN apt repository of NVIDIA driver packages for the nvidia_driver tests.

The real driver cannot be installed in a container (no GPU, no kernel module can be
loaded), so these packages only carry the names, versions and the
nvidia-persistenced / nvidia-fabricmanager units of the real ones; the role's
repository setup, holds, fabric-manager version matching and drift checks run
against them.  Every package says STAND-IN in its description.

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
]


def build(dest: Path, name: str, version: str, unit: str, command: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "DEBIAN").mkdir()
        (root / "DEBIAN" / "control").write_text(
            f"Package: {name}\nVersion: {version}-1\nArchitecture: all\n"
            "Maintainer: vllm-fleet tests <vllm-fleet@localhost>\n"
            f"Description: STAND-IN for NVIDIA's {name} (vllm-fleet tests; no driver inside)\n")
        units = root / "usr" / "lib" / "systemd" / "system"
        units.mkdir(parents=True)
        (units / f"{unit}.service").write_text(
            f"[Unit]\nDescription=STAND-IN {unit} (vllm-fleet tests)\n\n"
            f"[Service]\nExecStart={command}\n\n[Install]\nWantedBy=multi-user.target\n")
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
