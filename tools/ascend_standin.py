#!/usr/bin/env python3
"""Write STAND-IN Ascend installers (.run) for the ascend_cann tests.

Huawei's installers need NPUs and cannot run here.  These follow their documented
command line (--full / --install / --upgrade, --install-for-all, --quiet), write the
same version.info files, refuse what the real ones refuse (firmware or CANN before the
driver, a missing HwHiAiUser) and log every run to /var/log/ascend-standin.log so
tests can check the order.  The driver also installs a stand-in `npu-smi`.

  ascend_standin.py DEST COMPONENT=VERSION ...   # prints "component file version sha256" lines
"""
from __future__ import annotations

import hashlib
import sys
from pathlib import Path

ROOT = "/usr/local/Ascend"
FILES = {
    "driver": ("Ascend-hdk-910b-npu-driver_{v}_linux-x86_64.run", ROOT + "/driver"),
    "firmware": ("Ascend-hdk-910b-npu-firmware_{v}.run", ROOT + "/firmware"),
    "toolkit": ("Ascend-cann-toolkit_{v}_linux-x86_64.run", ROOT + "/ascend-toolkit/latest"),
    "kernels": ("Ascend-cann-910b-ops_{v}_linux-x86_64.run", ROOT + "/ascend-toolkit/latest/opp"),
    "nnal": ("Ascend-cann-nnal_{v}_linux-x86_64.run", ROOT + "/nnal/atb/latest"),
}
NEEDS_DRIVER = {"firmware", "toolkit", "kernels", "nnal"}
EXTRA = {
    "driver": 'mkdir -p /usr/local/bin\ncat > /usr/local/bin/npu-smi <<EOS\n#!/bin/sh\n'
              'echo "npu-smi STAND-IN (vllm-fleet tests) driver Version: $VERSION"\nEOS\n'
              'chmod 0755 /usr/local/bin/npu-smi\n',
    "toolkit": f'printf "export ASCEND_TOOLKIT_HOME={ROOT}/ascend-toolkit/latest\\n" > {ROOT}/ascend-toolkit/set_env.sh\n',
    "nnal": f'printf "export ATB_HOME_PATH={ROOT}/nnal/atb/latest\\n" > {ROOT}/nnal/atb/set_env.sh\n',
}


def script(component: str, version: str) -> str:
    folder = FILES[component][1]
    requires = (f'[ -f {ROOT}/driver/version.info ] || {{ echo "install the driver first" >&2; exit 4; }}\n'
                if component in NEEDS_DRIVER else
                'getent passwd HwHiAiUser >/dev/null || { echo "create HwHiAiUser first" >&2; exit 3; }\n')
    return f"""#!/bin/bash
# STAND-IN for Huawei's {FILES[component][0].format(v=version)} (vllm-fleet tests; installs nothing real)
set -e
VERSION={version}
mode=""
for arg in "$@"; do
  case "$arg" in
    --full|--install|--upgrade) mode="$arg" ;;
    --install-for-all|--quiet) ;;
    *) echo "unrecognized option $arg" >&2; exit 2 ;;
  esac
done
[ -n "$mode" ] || {{ echo "one of --full, --install, --upgrade is required" >&2; exit 2; }}
{requires}mkdir -p {folder}
printf 'Version=%s\\n' "$VERSION" > {folder}/version.info
{EXTRA.get(component, '')}echo "{component} $VERSION $mode" >> /var/log/ascend-standin.log
"""


def main() -> None:
    dest = Path(sys.argv[1])
    dest.mkdir(parents=True, exist_ok=True)
    for spec in sys.argv[2:]:
        component, version = spec.split("=", 1)
        path = dest / FILES[component][0].format(v=version)
        path.write_text(script(component, version))
        print(component, path.name, version, hashlib.sha256(path.read_bytes()).hexdigest())


if __name__ == "__main__":
    main()
