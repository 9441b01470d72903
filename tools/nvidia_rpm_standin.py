#!/usr/bin/env python3
"""Build a signed STAND-IN dnf repository of NVIDIA's RHEL-family driver packages for
the nvidia_driver tests.

No RHEL-family host can be built on these machines (only Debian's packages are
reachable), so the molecule scenario nvidia_driver_dnf runs the role's dnf path on a
Debian container with Debian's dnf, rpm and dnf-plugins-core, against these packages:
they carry only the names, versions, dependencies and the persistenced / fabric
manager units and STAND-IN daemons (tools/nvidia_daemons.py, beside this file) of
NVIDIA's, and every one says STAND-IN in its summary.  Run it where rpmbuild, rpmsign,
createrepo_c and gpg are (the container):

  nvidia_rpm_standin.py DEST   # DEST/*.rpm, DEST/repodata, DEST/RPM-GPG-KEY-standin
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nvidia_daemons

DRIVER = "580.159.04"
SIGNER = "vllm-fleet stand-in <standin@localhost>"
# name, version, requires, systemd unit
PACKAGES = [
    ("nvidia-driver", DRIVER, [], "nvidia-persistenced"),
    ("kmod-nvidia-open-dkms", DRIVER, [f"nvidia-driver = {DRIVER}"], None),
    ("nvidia-open", DRIVER, [f"nvidia-driver = {DRIVER}", f"kmod-nvidia-open-dkms = {DRIVER}"], None),
    ("nvidia-fabric-manager", DRIVER, [], "nvidia-fabricmanager"),
    # a newer fabric manager of the branch: the role must still take the driver's version
    ("nvidia-fabric-manager", "580.200.00", [], "nvidia-fabricmanager"),
    # the versionlock plugin itself comes from Debian's dnf-plugins-core here
    ("python3-dnf-plugin-versionlock", "4.14.0", [], None),
]


def spec(name: str, version: str, requires: list, unit: str | None) -> str:
    # AutoReqProv: no -- the stand-in daemons' #!/usr/bin/python3 would make the packages need
    # a python3 that no package of this container's rpm database provides
    lines = [f"Name: {name}", f"Version: {version}", "Release: 1", "License: none", "BuildArch: noarch",
             "AutoReqProv: no", f"Summary: STAND-IN for NVIDIA's {name} (vllm-fleet tests; no driver inside)"]
    lines += [f"Requires: {req}" for req in requires]
    lines += ["%description", f"STAND-IN for {name}.", "%install"]
    files = ["%files"]
    for path, (text, mode) in (nvidia_daemons.files(unit, version) if unit else {}).items():
        # a quoted here-document: the shell leaves the text alone; rpm's macros need %%
        lines += [f"mkdir -p %{{buildroot}}{os.path.dirname(path)}",
                  f"cat > %{{buildroot}}{path} <<'STANDIN_EOF'", text.rstrip("\n").replace("%", "%%"), "STANDIN_EOF"]
        files.append(f"%attr({mode:o},root,root) {path}")
    account = nvidia_daemons.user(unit or "")
    # a Lua scriptlet: a shell one would make the package need /bin/sh, which no package of
    # this Debian container's rpm database provides (useradd fails harmlessly on a re-install)
    post = ["%post -p <lua>", "rpm.execute(%s)" % ", ".join('"%s"' % arg for arg in nvidia_daemons.USERADD + [account])
            ] if account else []
    return "\n".join(lines + post + files) + "\n"


def run(*argv: str, **kwargs) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    if done.returncode:
        raise SystemExit(f"{argv[0]} failed ({done.returncode}): {done.stderr.strip()}")


def main() -> None:
    dest = Path(sys.argv[1])
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        top, gnupg = Path(tmp) / "rpmbuild", Path(tmp) / "gnupg"
        gnupg.mkdir(mode=0o700)
        env = dict(os.environ, GNUPGHOME=str(gnupg))
        for index, package in enumerate(PACKAGES):
            path = Path(tmp) / f"{index}.spec"
            path.write_text(spec(*package))
            run("rpmbuild", "-bb", "--define", f"_topdir {top}", str(path))
        rpms = sorted(str(p) for p in (top / "RPMS" / "noarch").glob("*.rpm"))
        run("gpg", "--batch", "--pinentry-mode", "loopback", "--passphrase", "", "--quick-gen-key",
            SIGNER, "rsa2048", "sign", "never", env=env)
        (dest / "RPM-GPG-KEY-standin").write_bytes(subprocess.run(
            ["gpg", "--export", "--armor", SIGNER], check=True, capture_output=True, env=env).stdout)
        run("rpmsign", "--addsign", "--define", f"_gpg_name {SIGNER}", "--define",
            f"__gpg {shutil.which('gpg')}", "--define",
            "_gpg_sign_cmd_extra_args --batch --pinentry-mode loopback", *rpms, env=env)
        for rpm in rpms:
            shutil.move(rpm, dest / Path(rpm).name)
    run("createrepo_c", str(dest))
    print(f"stand-in repository: {dest} ({len(PACKAGES)} packages, signed)")


if __name__ == "__main__":
    main()
