#!/usr/bin/env python3
"""Local container fleet: systemd "hosts" built from Debian's packages.

Used by the demo inventory and by every molecule scenario.  No image registry is
reachable on the machines this project is developed and tested on, so base images
are made with debootstrap and ``docker import`` (recipe:
docs/test-hosts.md) and cached under a tag that carries the
recipe's hash; an image is rebuilt only when its recipe changes.

    fleet.py daemon                      start dockerd when it is not answering
    fleet.py image bookworm [trixie …]   build (or reuse) the host images
    fleet.py up demo --hosts mirror,node1,node2:trixie [--release bookworm]
    fleet.py restart demo                reboot every host of the fleet
    fleet.py down demo

Every host runs openssh-server and is reached over SSH as a real fleet is: ``up`` gives
the fleet one key pair (``~/.cache/vllm-fleet/ssh/``), installs its public key for root,
gives each host host keys of its own, and writes ``<fleet>.config`` (an ssh_config: each
container name to its address, the key, root) and ``<fleet>.known_hosts`` (the hosts'
real keys: strict host key checking holds).  Inventories point ssh at the config with
``ansible_ssh_common_args: -F …``.
"""
from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RELEASES = ("bookworm", "bullseye", "trixie")
PACKAGES = (
    "systemd", "systemd-sysv", "python3", "sudo", "procps", "iproute2",
    "ca-certificates", "curl", "kmod", "openssh-server",
)
# The fleets' key pair, and each fleet's ssh_config and known_hosts.
SSH_DIR = Path.home() / ".cache" / "vllm-fleet" / "ssh"
REPO = Path(__file__).resolve().parent.parent
MIRROR = os.environ.get("VLLM_FLEET_DEBIAN_MIRROR", "http://deb.debian.org/debian")
IMAGE_REPO = "vllm-fleet/debian"
# A user-defined bridge: containers reach each other by name (the default bridge has no DNS).
NETWORK = "vllm-fleet"
LABEL = "org.vllm-fleet.recipe"

# The capability set that boots systemd on these machines (--privileged does not:
# CAP_SYS_RESOURCE is outside the VM's bounding set).  Keep in step with the
# molecule platforms in .config/molecule/config.yml.
RUN_OPTIONS = (
    "--cap-add", "SYS_ADMIN",
    # nftables: the engines' firewall (per network namespace: the machine's own rules stay).
    "--cap-add", "NET_ADMIN",
    "--security-opt", "seccomp=unconfined",
    "--security-opt", "apparmor=unconfined",
    "--security-opt", "systempaths=unconfined",
    "--cgroupns=host",
    "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw",
    # /sys is read-only in a container; the THP knobs are bind-mounted writable so
    # the os_tuning role can manage them as it would on a real host.
    "-v", "/sys/kernel/mm/transparent_hugepage:/sys/kernel/mm/transparent_hugepage:rw",
    "--tmpfs", "/run", "--tmpfs", "/tmp",
    # Docker's default /dev/shm is 64 MiB; vLLM's engine needs more for its shared-memory
    # message queue (a real host's /dev/shm is half of its memory).
    "--shm-size", "2g",
    # systemd as PID 1 halts cleanly on SIGRTMIN+3 (SIGTERM makes it re-execute).
    "--stop-signal", "SIGRTMIN+3",
)


def log(msg: str) -> None:
    print(f"[fleet] {msg}", file=sys.stderr, flush=True)


def run(*cmd: str, check: bool = True, capture: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=check, text=True,
                          stdout=subprocess.PIPE if capture else None,
                          stderr=subprocess.PIPE if capture else None)


def docker_ok() -> bool:
    return shutil.which("docker") is not None and run(
        "docker", "info", check=False, capture=True).returncode == 0


def ensure_tools() -> None:
    """Install Debian's docker.io, debootstrap and the SSH client when they are missing."""
    missing = [pkg for tool, pkg in (("dockerd", "docker.io"), ("debootstrap", "debootstrap"),
                                     ("ssh-keygen", "openssh-client"))
               if shutil.which(tool) is None]
    if missing:
        log(f"installing {' and '.join(missing)} from Debian's packages")
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
        subprocess.run(["apt-get", "install", "-y", "-qq", *missing], check=True, env=env)


def clear_stale_pidfile(pidfile: Path) -> None:
    """A daemon killed with its session leaves its pid file; dockerd refuses to start
    while one names a live process, so drop it when that process is gone."""
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return
    if not Path(f"/proc/{pid}").exists():
        pidfile.unlink()
        log(f"removed stale {pidfile} (pid {pid} is gone)")


def ensure_daemon(timeout: float = 60.0) -> None:
    """Start dockerd when nothing answers (no systemd runs it on these machines)."""
    ensure_tools()
    if docker_ok():
        return
    clear_stale_pidfile(Path("/var/run/docker.pid"))
    log("starting dockerd (log: /var/log/dockerd.log)")
    with open("/var/log/dockerd.log", "ab") as out:
        subprocess.Popen(["dockerd"], stdout=out, stderr=out, start_new_session=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if docker_ok():
            return
        time.sleep(1)
    sys.exit("dockerd did not answer within %ds; see /var/log/dockerd.log" % timeout)


def recipe(release: str) -> dict:
    return {"release": release, "packages": list(PACKAGES), "mirror": MIRROR,
            "variant": "minbase", "version": 1}


def recipe_hash(release: str) -> str:
    blob = json.dumps(recipe(release), sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def image_name(release: str) -> str:
    return f"{IMAGE_REPO}:{release}"


def image_current(release: str) -> bool:
    res = run("docker", "image", "inspect", "--format",
              "{{ index .Config.Labels \"%s\" }}" % LABEL, image_name(release),
              check=False, capture=True)
    return res.returncode == 0 and res.stdout.strip() == recipe_hash(release)


def build_image(release: str) -> None:
    if release not in RELEASES:
        sys.exit(f"unknown release {release!r}; choose from {', '.join(RELEASES)}")
    if image_current(release):
        log(f"{image_name(release)} is current (recipe {recipe_hash(release)})")
        return
    started = time.monotonic()
    log(f"building {image_name(release)} with debootstrap (about a minute)")
    with tempfile.TemporaryDirectory(prefix=f"rootfs-{release}-") as root:
        run("debootstrap", "--variant=minbase", "--include=" + ",".join(PACKAGES),
            release, root, MIRROR, capture=True)
        # An image without machine-id makes systemd generate one per container.
        Path(root, "etc/machine-id").write_text("")
        # ... and without host keys, so that no two hosts share one (up() makes them).
        for key in Path(root, "etc/ssh").glob("ssh_host_*"):
            key.unlink()
        tar = subprocess.Popen(["tar", "-C", root, "-c", "."], stdout=subprocess.PIPE)
        subprocess.run(["docker", "import",
                        "-c", 'CMD ["/lib/systemd/systemd"]',
                        "-c", f"LABEL {LABEL}={recipe_hash(release)}",
                        "-", image_name(release)], stdin=tar.stdout, check=True,
                       stdout=subprocess.DEVNULL)
        if tar.wait() != 0:
            sys.exit("tar of the root filesystem failed")
    log(f"built {image_name(release)} in {time.monotonic() - started:.0f}s")


def container_name(fleet: str, host: str) -> str:
    return f"{fleet}-{host}"


def parse_hosts(spec: str, default_release: str) -> list[tuple[str, str]]:
    """``node1,node2:trixie`` -> ``[("node1", default), ("node2", "trixie")]``."""
    hosts = []
    for item in filter(None, spec.split(",")):
        name, _, release = item.partition(":")
        release = release or default_release
        if release not in RELEASES:
            sys.exit(f"host {name}: unknown release {release!r}; choose from {', '.join(RELEASES)}")
        hosts.append((name, release))
    return hosts


def ensure_network() -> None:
    def exists() -> bool:
        return run("docker", "network", "inspect", NETWORK, check=False, capture=True).returncode == 0

    # Two scenarios may boot at once (tools/molecule_all.py): the other may create it first.
    if not exists() and run("docker", "network", "create", NETWORK, check=False, capture=True).returncode != 0 \
            and not exists():
        raise SystemExit("fleet: could not create the docker network %s" % NETWORK)


def up(fleet: str, hosts: list[tuple[str, str]]) -> None:
    ensure_daemon()
    ensure_network()
    for release in sorted({release for _name, release in hosts}):
        build_image(release)
    for host, release in hosts:
        name = container_name(fleet, host)
        state = run("docker", "inspect", "--format", "{{.State.Running}}", name,
                    check=False, capture=True)
        if state.returncode == 0 and state.stdout.strip() == "true":
            log(f"{name} is running")
            continue
        if state.returncode == 0:
            run("docker", "start", name, capture=True)
        else:
            run("docker", "run", "-d", "--name", name, "--hostname", name, "--network", NETWORK,
                "--label", f"org.vllm-fleet.fleet={fleet}", *RUN_OPTIONS,
                image_name(release), capture=True)
        log(f"{name} started ({release})")
    for host, _release in hosts:
        wait_booted(container_name(fleet, host))
    # the config lists every host of the fleet, not only these: a host added later (up with
    # one more) must not take the others out of it
    write_ssh(fleet, fleet_hosts(fleet))


def wait_booted(name: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        res = run("docker", "exec", name, "systemctl", "is-system-running", check=False,
                  capture=True)
        if res.stdout.strip() in ("running", "degraded"):
            return
        time.sleep(1)
    sys.exit(f"{name}: systemd did not finish booting within {timeout:.0f}s")


def ssh_key() -> Path:
    """The fleets' private key (made once, ed25519, no passphrase: a test fleet's).  Fleets
    boot at the same time (make test runs the demo beside molecule's scenarios): the first
    makes the key under a lock, the others wait for it and read it."""
    key = SSH_DIR / "fleet_ed25519"
    SSH_DIR.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(SSH_DIR / ".fleet_ed25519.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not key.exists():
            run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "vllm-fleet", "-f", str(key), capture=True)
    return key


# On each host: host keys of its own (the image has none), the fleet's key for root, sshd on.
# (bookworm's sshd fails at boot without keys; trixie's sshd-keygen.service makes them at boot
# and its sshd runs: start it only where it does not, after clearing the boot's failures.)
HOST_SSH_SETUP = r"""set -e
test -e /etc/ssh/ssh_host_ed25519_key || ssh-keygen -A >/dev/null
install -d -m 0700 /root/.ssh
cat > /root/.ssh/authorized_keys
chmod 0600 /root/.ssh/authorized_keys
systemctl enable ssh 2>&1
if ! systemctl is-active --quiet ssh; then systemctl reset-failed ssh; systemctl start ssh; fi
cat /etc/ssh/ssh_host_ed25519_key.pub
"""


def ssh_paths(fleet: str) -> tuple[Path, Path]:
    """Where the fleet's ssh_config and known_hosts are."""
    return SSH_DIR / f"{fleet}.config", SSH_DIR / f"{fleet}.known_hosts"


def ssh_files(fleet: str, hosts: dict, key: Path) -> tuple[str, str]:
    """(ssh_config, known_hosts) for ``hosts``: container name -> (address, host key)."""
    _config, known = ssh_paths(fleet)
    config = ["# written by tools/fleet.py up %s" % fleet]
    lines = []
    for name, (ip, host_key) in sorted(hosts.items()):
        config += ["Host %s" % name, "  HostName %s" % ip, "  HostKeyAlias %s" % name]
        lines.append("%s %s" % (name, " ".join(host_key.split()[:2])))
    config += ["Host *", "  User root", "  IdentityFile %s" % key, "  IdentitiesOnly yes",
               "  UserKnownHostsFile %s" % known, "  StrictHostKeyChecking yes"]
    return "\n".join(config) + "\n", "\n".join(lines) + "\n"


def write_ssh(fleet: str, hosts: list[str], setup: bool = True) -> None:
    """Make every host of the fleet reachable over SSH (``setup``: a restarted host keeps its
    keys) and write the fleet's config and known_hosts."""
    key = ssh_key()
    public = key.with_suffix(".pub").read_text()
    script = HOST_SSH_SETUP if setup else "cat /etc/ssh/ssh_host_ed25519_key.pub"
    found = {}
    for host in hosts:
        name = container_name(fleet, host)
        done = subprocess.run(["docker", "exec", "-i", name, "sh", "-c", script], input=public,
                              text=True, capture_output=True)
        if done.returncode:
            sys.exit(f"{name}: could not set up sshd: {(done.stdout + done.stderr).strip()[-500:]}")
        found[name] = (address(fleet, host), done.stdout.strip().splitlines()[-1])
    config_path, known_path = ssh_paths(fleet)
    config, known = ssh_files(fleet, found, key)
    known_path.write_text(known)
    config_path.write_text(config)
    log(f"ssh: {config_path} ({len(found)} host(s))")


def demo_settings() -> str:
    """The demo inventory's group_vars/all.yml, its paths into this repository made absolute,
    for the benches' inventories of other local fleets (the same settings, hosts of their own)."""
    text = (REPO / "inventories/demo/group_vars/all.yml").read_text()
    return text.replace("{{ inventory_dir }}/../..", str(REPO))


def address(fleet: str, host: str) -> str:
    """The host's IP on the fleet network (the control node reaches it directly)."""
    fmt = "{{(index .NetworkSettings.Networks \"%s\").IPAddress}}" % NETWORK
    return run("docker", "inspect", "--format", fmt, container_name(fleet, host),
               capture=True).stdout.strip()


def fleet_containers(fleet: str) -> list[str]:
    return run("docker", "ps", "-aq", "--filter", f"label=org.vllm-fleet.fleet={fleet}",
               capture=True).stdout.split()


def fleet_hosts(fleet: str) -> list[str]:
    """The host names (container names without the fleet's prefix) of the fleet's running containers."""
    names = run("docker", "ps", "--filter", f"label=org.vllm-fleet.fleet={fleet}", "--format", "{{.Names}}",
                capture=True).stdout.split()
    return sorted(name[len(fleet) + 1:] for name in names)


def restart(fleet: str) -> None:
    """Reboot every host of a fleet (a container restart) and wait for systemd."""
    ids = fleet_containers(fleet)
    if not ids:
        sys.exit(f"fleet {fleet!r} has no containers")
    run("docker", "restart", *ids, capture=True)
    for cid in ids:
        wait_booted(cid)
    # a restarted container may come back on another address
    write_ssh(fleet, fleet_hosts(fleet), setup=False)
    log(f"restarted {len(ids)} container(s) of fleet {fleet!r}")


def down(fleet: str) -> None:
    if not docker_ok():
        return
    ids = fleet_containers(fleet)
    if ids:
        run("docker", "rm", "-f", *ids, capture=True)
    log(f"removed {len(ids)} container(s) of fleet {fleet!r}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("daemon", help="start dockerd when it is not answering")
    img = sub.add_parser("image", help="build or reuse host images")
    img.add_argument("releases", nargs="+", choices=RELEASES)
    p_up = sub.add_parser("up", help="create and boot a fleet's containers")
    p_up.add_argument("fleet")
    p_up.add_argument("--hosts", required=True,
                      help="comma-separated host names, each optionally NAME:RELEASE")
    p_up.add_argument("--release", default="bookworm", choices=RELEASES)
    p_restart = sub.add_parser("restart", help="reboot a fleet's containers")
    p_restart.add_argument("fleet")
    p_down = sub.add_parser("down", help="remove a fleet's containers")
    p_down.add_argument("fleet")
    args = parser.parse_args(argv)
    if args.cmd == "daemon":
        ensure_daemon()
    elif args.cmd == "image":
        ensure_daemon()
        for release in args.releases:
            build_image(release)
    elif args.cmd == "up":
        up(args.fleet, parse_hosts(args.hosts, args.release))
    elif args.cmd == "restart":
        restart(args.fleet)
    else:
        down(args.fleet)


if __name__ == "__main__":
    main()
