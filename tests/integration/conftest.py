"""Run the project's real playbooks and read their JSON report."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Run:
    rc: int
    report: dict
    stderr: str

    def tasks(self) -> list:
        return [t for play in self.report["plays"] for t in play["tasks"]]

    def host_results(self, host: str) -> list:
        return [(t["task"]["name"].split(" : ", 1)[-1], t["hosts"][host])
                for t in self.tasks() if host in t["hosts"]]

    def failure(self, host: str) -> tuple[str, str]:
        """(task name, message) of the host's failing task."""
        name, result = next((n, r) for n, r in self.host_results(host) if r.get("failed"))
        message = result.get("msg", "") + " ".join(r.get("msg", "") for r in result.get("results", []))
        return name, message

    def fact(self, host: str, name: str):
        """The last value the host's tasks set for the fact ``name`` (found by the fact,
        not by a task's name)."""
        values = [r["ansible_facts"][name] for _n, r in self.host_results(host)
                  if name in r.get("ansible_facts", {})]
        assert values, "no task of %s set %s" % (host, name)
        return values[-1]

    def changed(self) -> int:
        return sum(stats["changed"] for stats in self.report["stats"].values())


@pytest.fixture
def playbook(tmp_path):
    """``playbook("preflight.yml", inventory, extra_vars={}, check=False, tags="", skip_tags="")``.

    ``inventory`` is a path or the text of an INI inventory.  The project's paths are
    set without its ansible.cfg, whose timing callback would print beside the report.
    """
    (tmp_path / "ansible.cfg").write_text("")

    def _run(name: str, inventory, extra_vars: dict | None = None, check: bool = False, tags: str = "",
             skip_tags: str = "") -> Run:
        if not isinstance(inventory, Path):
            path = tmp_path / "hosts.ini"
            path.write_text(inventory)
            inventory = path
        argv = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"),
                "-i", str(inventory), str(ROOT / "playbooks" / name)]
        if extra_vars:
            (tmp_path / "vars.json").write_text(json.dumps(extra_vars))
            argv += ["-e", f"@{tmp_path / 'vars.json'}"]
        if check:
            argv.append("--check")
        if tags:
            argv += ["--tags", tags]
        if skip_tags:
            argv += ["--skip-tags", skip_tags]
        env = dict(os.environ, ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg"),
                   ANSIBLE_STDOUT_CALLBACK="json", ANSIBLE_NOCOLOR="1",
                   ANSIBLE_LIBRARY=str(ROOT / "library"),
                   ANSIBLE_MODULE_UTILS=str(ROOT / "module_utils"),
                   ANSIBLE_ROLES_PATH=str(ROOT / "roles"))
        proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
        return Run(proc.returncode, json.loads(proc.stdout), proc.stderr)

    return _run


@pytest.fixture
def localhost_inventory() -> str:
    return (f"[inference]\nlocalhost ansible_connection=local "
            f"ansible_python_interpreter={sys.executable}\n")
