"""The STAND-IN NVIDIA daemons the stand-in driver packages carry (tools/nvidia_standin.py
for apt, tools/nvidia_rpm_standin.py for dnf): nvidia-persistenced and nv-fabricmanager
with the units NVIDIA ships them with, taking the options the real programs take and
refusing what they refuse, so that "the service is running" can fail.

- nvidia-persistenced: the options of its option table (github.com/NVIDIA/nvidia-persistenced,
  option-table.h) and its sample unit (init/systemd/nvidia-persistenced.service.template,
  Type=forking, --user); it needs a loaded driver and an existing --user.
- nv-fabricmanager: -c CONFIG, -r, -v as its usage gives them, and NVIDIA's unit
  (Type=forking, -c /usr/share/nvidia/nvswitch/fabricmanager.cfg); it needs its config and
  a loaded driver of exactly its own version (the real one stops on the mismatch).

"A loaded driver" is /proc/driver/nvidia/version, which no container has unless a test
gives it one (molecule nvidia_driver_dnf's side effect); VLLM_FLEET_STANDIN_PROC names
another file for the unit tests.  Both daemons detach, as Type=forking expects, and then
only sleep.
"""
from __future__ import annotations

PERSISTENCED_USER = "nvidia-persistenced"
FABRICMANAGER_CONFIG = "/usr/share/nvidia/nvswitch/fabricmanager.cfg"

COMMON = r'''
import argparse, os, pwd, re, sys, time
def loaded_driver():
    path = os.environ.get("VLLM_FLEET_STANDIN_PROC", "/proc/driver/nvidia/version")
    try:
        text = open(path).read()
    except OSError:
        return None
    found = re.search(r"Kernel Module.*?\s(\d+\.\d+(?:\.\d+)?)\s", text)
    return found.group(1) if found else None
def detach(pidfile, user=None):
    if os.fork():
        sys.exit(0)
    os.setsid()
    if pidfile:
        os.makedirs(os.path.dirname(pidfile), exist_ok=True)
        if user:
            os.chown(os.path.dirname(pidfile), user.pw_uid, user.pw_gid)
        with open(pidfile, "w") as f:
            f.write("%d\n" % os.getpid())
    if user:
        os.setgid(user.pw_gid)
        os.setuid(user.pw_uid)
    while True:
        time.sleep(3600)
'''

PERSISTENCED = "#!/usr/bin/python3\n# STAND-IN for NVIDIA's nvidia-persistenced (vllm-fleet tests): no GPU.\n" + COMMON + r'''
parser = argparse.ArgumentParser(prog="nvidia-persistenced")
parser.add_argument("-v", "--version", action="store_true")
parser.add_argument("-V", "--verbose", action="store_true")
parser.add_argument("-u", "--user")
parser.add_argument("-g", "--group")
parser.add_argument("--persistence-mode", action=argparse.BooleanOptionalAction, default=True)
parser.add_argument("--uvm-persistence-mode", action=argparse.BooleanOptionalAction, default=False)
parser.add_argument("--nvidia-cfg-path")
parser.add_argument("-f", "--foreground", action="store_true")
args = parser.parse_args()
if args.version:
    print("nvidia-persistenced: STAND-IN")
    sys.exit(0)
try:
    user = pwd.getpwnam(args.user) if args.user else None
except KeyError:
    sys.exit("nvidia-persistenced failed to initialize: no user %s" % args.user)
if loaded_driver() is None:
    sys.exit("nvidia-persistenced failed to initialize: the NVIDIA driver is not loaded")
if args.foreground:
    while True:
        time.sleep(3600)
detach("/var/run/nvidia-persistenced/nvidia-persistenced.pid", user)
'''

FABRICMANAGER = "#!/usr/bin/python3\n# STAND-IN for NVIDIA's nv-fabricmanager (vllm-fleet tests): no NVSwitch.\n" + COMMON + r'''
VERSION = "@VERSION@"
parser = argparse.ArgumentParser(prog="nv-fabricmanager")
parser.add_argument("-c", "--config", default="@CONFIG@")
parser.add_argument("-r", "--restart", action="store_true")
parser.add_argument("-v", "--version", action="store_true")
args = parser.parse_args()
if args.version:
    print("Fabric Manager version is : %s" % VERSION)
    sys.exit(0)
if not os.path.isfile(args.config):
    sys.exit("fabric manager: config file %s not found" % args.config)
loaded = loaded_driver()
if loaded is None:
    sys.exit("fabric manager: the NVIDIA driver is not loaded")
if loaded != VERSION:
    sys.exit("fabric manager version %s and the loaded driver %s do not match (interface version mismatch)"
             % (VERSION, loaded))
detach(None)
'''

UNITS = {
    "nvidia-persistenced": "[Unit]\nDescription=NVIDIA Persistence Daemon (STAND-IN)\nWants=syslog.target\n\n"
                           "[Service]\nType=forking\nExecStart=/usr/bin/nvidia-persistenced --user %s\n"
                           "ExecStopPost=/bin/rm -rf /var/run/nvidia-persistenced\n\n"
                           "[Install]\nWantedBy=multi-user.target\n" % PERSISTENCED_USER,
    "nvidia-fabricmanager": "[Unit]\nDescription=NVIDIA fabric manager service (STAND-IN)\n\n"
                            "[Service]\nUser=root\nPrivateTmp=false\nType=forking\nTimeoutStartSec=240\n"
                            "ExecStart=/usr/bin/nv-fabricmanager -c %s\n\n"
                            "[Install]\nWantedBy=multi-user.target\n" % FABRICMANAGER_CONFIG,
}


def files(unit: str, version: str) -> dict:
    """{path: (text, mode)} a package carrying ``unit`` installs."""
    found = {"/usr/lib/systemd/system/%s.service" % unit: (UNITS[unit], 0o644)}
    if unit == "nvidia-persistenced":
        found["/usr/bin/nvidia-persistenced"] = (PERSISTENCED, 0o755)
    elif unit == "nvidia-fabricmanager":
        found["/usr/bin/nv-fabricmanager"] = (
            FABRICMANAGER.replace("@VERSION@", version).replace("@CONFIG@", FABRICMANAGER_CONFIG), 0o755)
        found[FABRICMANAGER_CONFIG] = ("# STAND-IN fabric manager configuration\nFABRIC_MODE=0\n", 0o644)
    return found


# How the stand-in packages make the daemon's user (the real nvidia-persistenced package
# makes its own), plus the name.
USERADD = ["/usr/sbin/useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
           "--shell", "/usr/sbin/nologin"]


def user(unit: str) -> str | None:
    """The user a package carrying ``unit`` makes when it is installed."""
    return PERSISTENCED_USER if unit == "nvidia-persistenced" else None
