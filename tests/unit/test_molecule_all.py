"""tools/molecule_all.py: the order scenarios run in, each line streamed behind its
scenario's name as it comes, and a scenario stopped at its time limit."""
from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

TOOL = Path(__file__).resolve().parents[2] / "tools" / "molecule_all.py"
sys.path.insert(0, str(TOOL.parent))
import molecule_all  # noqa: E402


def test_serve_starts_first_the_operator_beside_it_the_rest_keep_their_order_and_os_tuning_waits():
    assert molecule_all.plan(["ascend_cann", "os_tuning", "serve", "vllm_runtime", "operator"]) == (
        ["serve", "operator", "ascend_cann", "vllm_runtime"], ["os_tuning"])


def fake_molecule(tmp_path: Path) -> Path:
    """A `molecule test -s NAME` that prints two lines a second apart (four seconds when NAME is
    `long`), sleeps for ever when NAME is `hangs` and, when NAME is `fails`, prints Ansible's failure of a task it
    ignored, then of one that stops it, and fails."""
    script = tmp_path / "molecule"
    script.write_text("#!/bin/sh\necho \"$3 begins\"\nsleep 1\n[ \"$3\" = long ] && sleep 3\necho \"$3 ends\"\n"
                      "[ \"$3\" = hangs ] && exec sleep 600\n"
                      "[ \"$3\" = fails ] && printf '%s\\n' 'fatal: [a]: FAILED! => ignored' '...ignoring' "
                      "'fatal: [b]: FAILED! => {\"msg\": \"why\"}' && exit 3\nexit 0\n")
    script.chmod(0o755)
    return script


def run_tool(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    run = subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, timeout=120,
                         env={"MOLECULE": str(fake_molecule(tmp_path)), "PATH": "/usr/bin:/bin"})
    return run, time.monotonic() - started


def test_each_line_comes_behind_its_scenario_and_a_failure_is_counted(tmp_path):
    run, _took = run_tool(tmp_path, "--jobs", "1", "passes", "fails")
    lines = run.stdout.splitlines()
    assert lines[:2] == ["[passes] passes begins", "[passes] passes ends"]
    assert "[fails] fails ends" in lines
    assert lines[-1] == "molecule: 2 scenario(s), failed: fails"
    assert run.returncode == 1


def test_the_last_screen_says_why_a_scenario_failed(tmp_path):
    """CI keeps the end of a long run: a failure printed 40 minutes earlier is not on it."""
    run, _took = run_tool(tmp_path, "--jobs", "1", "fails", "passes")
    assert run.stdout.splitlines()[-4:-1] == [
        "fails failed; the last lines that say why:",
        "  fatal: [a]: FAILED! => ignored",
        '  fatal: [b]: FAILED! => {"msg": "why"}']


def test_os_tuning_runs_when_every_other_scenario_has_ended(tmp_path):
    """It sets vm.* sysctls and huge pages, which the containers share with the machine."""
    run, _took = run_tool(tmp_path, "--jobs", "2", "os_tuning", "serve", "passes")
    lines = run.stdout.splitlines()
    begins = lines.index("[os_tuning] os_tuning begins")
    assert begins > max(lines.index("[serve] serve ends"), lines.index("[passes] passes ends")), lines
    assert run.returncode == 0, run.stdout


def test_make_test_runs_each_scenario_in_one_of_its_two_parts(tmp_path):
    """`make test` runs `--part alone` in its first phase and `--part shared` in its second,
    both over every scenario: os_tuning only in the first, each other one only in the second."""
    alone, _took = run_tool(tmp_path, "--part", "alone", "os_tuning", "serve", "passes")
    shared, _took = run_tool(tmp_path, "--part", "shared", "os_tuning", "serve", "passes")
    began = [sorted(line.split()[1] for line in run.stdout.splitlines() if line.endswith(" begins"))
             for run in (alone, shared)]
    assert began == [["os_tuning"], ["passes", "serve"]], (alone.stdout, shared.stdout)
    assert (alone.returncode, shared.returncode) == (0, 0)


def test_the_worker_that_ends_serve_takes_the_next_scenario(tmp_path):
    """serve ends while the other worker still runs `long`: `passes`, next in the order,
    starts on serve's worker then, not after `long`."""
    run, _took = run_tool(tmp_path, "--jobs", "2", "serve", "long", "passes")
    lines = run.stdout.splitlines()
    assert lines.index("[serve] serve ends") < lines.index("[passes] passes begins") < lines.index(
        "[long] long ends"), lines
    assert run.returncode == 0, run.stdout


def test_a_scenario_past_its_limit_is_stopped_and_failed(tmp_path):
    run, took = run_tool(tmp_path, "--jobs", "2", "--limit", "3", "hangs", "passes")
    assert "[hangs] time limit of 3s reached: stopping the scenario" in run.stdout
    assert re.search(r"^molecule scenario hangs: \d+s \(FAILED, rc 124\)$", run.stdout, re.M), run.stdout
    assert run.stdout.splitlines()[-1] == "molecule: 2 scenario(s), failed: hangs"
    assert run.returncode == 1 and took < 60
