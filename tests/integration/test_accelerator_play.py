"""playbooks/accelerator.yml: its one-host-at-a-time play holds the hosts whose engine has
an accelerator stack (CUDA, Ascend) and no other; a CPU host is grouped with the rest at
once and never waits in a batch of its own.  Local hosts, check mode: nothing is
installed here, and the stacks' own tasks are skipped (`--skip-tags accelerator`, the tag
the play applies to them): what is asserted is which hosts each play held."""
from __future__ import annotations

import sys

STACK_PLAY = "Install or verify the accelerator stack"


def hosts_of(run, play_name: str) -> set:
    return {host for play in run.report["plays"] if play["play"]["name"] == play_name
            for task in play["tasks"] for host in task["hosts"]}


def inventory(engines: dict) -> str:
    lines = ["[inference]"] + ["%s ansible_connection=local ansible_python_interpreter=%s vllm_fleet_engine=%s"
                               % (host, sys.executable, engine) for host, engine in engines.items()]
    return "\n".join(lines) + "\n"


def test_a_cpu_fleet_passes_no_host_through_the_one_at_a_time_play(playbook):
    run = playbook("accelerator.yml", inventory({"cpu%d" % n: "cpu" for n in range(1, 5)}), check=True,
                   skip_tags="accelerator")
    assert hosts_of(run, STACK_PLAY) == set()
    grouped = hosts_of(run, "Group the inference hosts by the accelerator stack their engine needs")
    assert grouped == {"cpu1", "cpu2", "cpu3", "cpu4"}
    assert run.rc == 0 and run.changed() == 0, run.stderr[-2000:]


def test_the_one_at_a_time_play_holds_the_cuda_host_alone(playbook):
    run = playbook("accelerator.yml", inventory({"cpu1": "cpu", "gpu1": "cuda", "cpu2": "cpu"}), check=True,
                   skip_tags="accelerator")
    assert hosts_of(run, STACK_PLAY) == {"gpu1"}, run.stderr[-2000:]
    assert run.rc == 0, run.stderr[-2000:]
