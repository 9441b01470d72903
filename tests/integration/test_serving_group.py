"""A serving group, one engine over two hosts, served by role vllm_service on two real
systemd hosts (tools/fleet.py) with the STAND-IN for vLLM (tests/fixtures/standin_vllm,
which follows vLLM's multi-node flags: the head is healthy only once its headless worker
has joined at master-addr:master-port).  What it shows: the worker starts before the head
and the head's health gate passes only with the group whole; a second converge changes
nothing; a change of the head alone restarts the whole group, the head stopped before its
worker restarts.  No model runs (the CPU engine cannot span hosts; docs/multinode.md)."""
from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import fleet  # noqa: E402

FLEET = "group"
HOSTS = ["head", "worker"]
VENV = "/opt/standin"
STANDIN = ROOT / "tests/fixtures/standin_vllm/vllm"


def sh(host: str, command: str) -> str:
    return subprocess.run(["docker", "exec", fleet.container_name(FLEET, host), "bash", "-ec", command],
                          check=True, capture_output=True, text=True).stdout.strip()


def unit(host: str, *properties: str) -> dict:
    text = sh(host, "systemctl show vllm@standin.service --property " + ",".join(properties))
    return dict(line.split("=", 1) for line in text.splitlines())


def group_plan(rank: int, head_address: str, env: dict) -> dict:
    args = {"host": "0.0.0.0", "port": 8000, "served-model-name": "standin", "pipeline-parallel-size": 2,
            "nnodes": 2, "node-rank": rank, "master-addr": head_address}
    if rank:
        args["headless"] = True
    return {"engine": "cpu", "vllm_version": "0.32.0", "shutdown_timeout": 0, "vllm_env": env,
            "model": {"repo": "demo/standin", "revision": "0" * 40},
            "instances": [{"name": "standin", "port": 8000, "devices": [], "args": args}],
            "multinode": {"nnodes": 2, "node_rank": rank, "master_addr": head_address,
                          "role": "worker" if rank else "head"}}


@contextlib.contextmanager
def journals_on_failure():
    """Print both hosts' journals of the unit when a check fails."""
    try:
        yield
    except AssertionError:
        for host in HOSTS:
            print(f"--- journal of vllm@standin on {host}\n"
                  + sh(host, "journalctl --no-pager -o short-monotonic -u vllm@standin.service | tail -40"))
        raise


@pytest.fixture(scope="module")
def group():
    if not fleet.docker_ok():
        pytest.skip("no Docker daemon (make test starts one)")
    fleet.down(FLEET)
    fleet.up(FLEET, [(h, "bookworm") for h in HOSTS])
    for host in HOSTS:
        site = sh(host, f"python3 -m venv --without-pip {VENV} && {VENV}/bin/python -c "
                        "'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])'")
        subprocess.run(["docker", "cp", str(STANDIN), f"{fleet.container_name(FLEET, host)}:{site}/"], check=True)
        sh(host, f"printf '#!{VENV}/bin/python\\nimport sys\\nfrom vllm.entrypoints.cli.main import main\\n"
                 f"sys.exit(main())\\n' > {VENV}/bin/vllm && chmod 0755 {VENV}/bin/vllm && mkdir -p /srv/model")
    yield fleet.address(FLEET, "head")
    fleet.down(FLEET)


def converge(playbook, tmp_path: Path, head_address: str, head_env: dict):
    hosts = {h: {"ansible_connection": "community.docker.docker", "ansible_host": fleet.container_name(FLEET, h),
                 "preflight_plan": group_plan(rank, head_address, head_env if rank == 0 else {})}
             for rank, h in enumerate(HOSTS)}
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {
        "vars": {"preflight_serving_group": HOSTS, "vllm_runtime_venv": VENV, "vllm_model_snapshot_path": "/srv/model",
                 "vllm_fleet_api_key": "group-test-key", "vllm_service_probe": False,
                 "vllm_service_start_timeout": 120},
        "children": {"inference": {"hosts": hosts}}}}))
    book = tmp_path / "serve.yml"
    book.write_text(yaml.safe_dump([{"name": "Serve the group", "hosts": "inference",
                                     "roles": ["vllm_service"]}]))
    run = playbook(book, inventory)
    assert run.rc == 0, run.stderr[-3000:] + str([t for t in run.tasks() if any(
        r.get("failed") for r in t["hosts"].values())])[-3000:]
    return run


def test_the_worker_starts_first_and_the_group_restarts_as_one(group, playbook, tmp_path):
    with journals_on_failure():
        check_the_group(group, playbook, tmp_path)


def check_the_group(group, playbook, tmp_path):
    times = ("ExecMainStartTimestampMonotonic", "InactiveEnterTimestampMonotonic", "ActiveState")
    converge(playbook, tmp_path, group, {})
    head, worker = unit("head", *times), unit("worker", *times)
    assert head["ActiveState"] == worker["ActiveState"] == "active"
    assert int(worker["ExecMainStartTimestampMonotonic"]) < int(head["ExecMainStartTimestampMonotonic"])
    # active means the head's gate passed: /health answers only once the worker joined
    assert sh("head", "curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8000/health") == "200"
    assert f"{VENV}/bin/vllm serve" in sh("worker", "systemctl show -p ExecStart --value vllm@standin.service")

    again = converge(playbook, tmp_path, group, {})
    assert again.changed() == 0

    # The head's environment alone changes: the worker restarts too, after the head stopped.
    changed = converge(playbook, tmp_path, group, {"STANDIN_GENERATION": "2"})
    restarts = {h: [r for name, r in changed.host_results(h) if name == "Restart what changed, one instance at a time"]
                for h in HOSTS}
    assert [r.get("changed") for r in restarts["worker"]] == [True], "the worker was not restarted with its head"
    stops = [r for name, r in changed.host_results("head")
             if name == "Stop the head of a serving group before its workers restart"]
    assert [r.get("changed") for r in stops] == [True]
    head2, worker2 = unit("head", *times), unit("worker", *times)
    assert head2["ActiveState"] == worker2["ActiveState"] == "active"
    assert int(worker2["ExecMainStartTimestampMonotonic"]) > int(head["ExecMainStartTimestampMonotonic"])
    assert int(head2["InactiveEnterTimestampMonotonic"]) < int(worker2["ExecMainStartTimestampMonotonic"])
    assert int(head2["ExecMainStartTimestampMonotonic"]) > int(head["ExecMainStartTimestampMonotonic"])
    assert sh("head", "curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8000/health") == "200"
