#!/usr/bin/env python3
"""Run molecule scenarios, the longest beside the others, and the operator's path.

`make molecule` calls it.  Scenario `serve` (a whole fleet, its rollouts under load)
takes most of the time and the others mostly wait on apt and Ansible, so by default two
workers take the scenarios, `serve` first, each the next one waiting as it ends one
(--jobs 1: every scenario one after another).  A scenario that sets kernel state no container has its own of
(`os_tuning`: vm.* sysctls, transparent huge pages) runs last, alone, so that it cannot
change what another scenario's idempotence or verify reads.  `--part alone` runs only
those, `--part shared` all but those: `make test` runs `--part alone` beside lint and the
unit tests, which read no kernel state, and `--part shared` after them.

`operator` is no molecule scenario: it is the demo fleet and what an operator runs on it
with the repository's own ansible.cfg over SSH (tests/operator).  It runs first beside
`serve`, so that its demo fleet (two engines) is gone before `serve`'s verify puts its
engines under load.

Each line a scenario prints is printed as it comes, behind the scenario's name; each
scenario has a time limit (--limit, seconds), past which it is stopped and counted as
failed.  The exit status is non-zero when any scenario failed.  At the end, after each
scenario's time, come the last lines that say why each failed scenario failed (an
Ansible `fatal:`, a pytest `E ` or `FAILED` line), so that the last screen of a long run
(what CI keeps) shows the cause, not just the name.  MOLECULE names another molecule command
(the unit tests give a stand-in).

    molecule_all.py [--jobs 1|2] [--limit SECONDS] [--part all|shared|alone] SCENARIO ...
"""
from __future__ import annotations

import argparse
import collections
import concurrent.futures
import os
import re
import signal
import subprocess
import sys
import threading
import time

# The scenarios that take longest first; beside them first the operator's path, whose demo
# fleet (a converge, two engines) must be gone before serve's verify restarts engines under
# load (beside that verify it slowed a restart to 92 s and cost one request in CI), then the
# others in the order given; last, with nothing beside them, those that change host-wide
# kernel state (os_tuning).  (The unit tests stay before the scenarios: in that lane, after
# the operator's path, they took 419 s off the start and added 436 s to serve, whose
# verify then shared the cores with them; CI 3,483 s against 3,456, 2026-12-04.)
LONGEST = ("serve",)
EARLY = ("operator",)
ALONE = ("os_tuning",)
# Jobs that are not molecule scenarios: their command line.
COMMANDS = {"operator": [sys.executable, "-m", "pytest", "-v", "-s", "-p", "no:cacheprovider", "tests/operator"]}
PRINT = threading.Lock()
# A line that says why a scenario failed: Ansible's task failure, pytest's assertion and
# its summary, a Python exception; the last CAUSES of them are kept (Ansible stops at the
# failure that counts, after any it ignored; pytest summarises last), each cut at WIDTH.
CAUSE = re.compile(r"^(fatal: |failed: |FAILED |ERROR |E  +\S|[A-Za-z.]*(Error|Exception): )")
CAUSES = 6
WIDTH = 400


def say(scenario: str, line: str) -> None:
    with PRINT:
        sys.stdout.write("[%s] %s\n" % (scenario, line.rstrip("\n")))
        sys.stdout.flush()


def verdict(scenario: str, rc: int, took: float) -> str:
    return "molecule scenario %s: %ds%s" % (scenario, took, "" if rc == 0 else " (FAILED, rc %d)" % rc)


def run(scenario: str, molecule: str, limit: float) -> tuple[str, int, float, list[str]]:
    """`molecule test -s SCENARIO` (or the job's command), its output streamed; stopped
    (rc 124) past ``limit``.  Returns the scenario, its exit status, its seconds and the
    last lines that say why it failed."""
    started = time.monotonic()
    process = subprocess.Popen(COMMANDS.get(scenario, [molecule, "test", "-s", scenario]), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, errors="replace", start_new_session=True)
    expired = threading.Event()

    def signal_group(number: int) -> None:
        try:
            os.killpg(process.pid, number)
        except ProcessLookupError:
            pass

    def stop() -> None:
        expired.set()
        say(scenario, "time limit of %ds reached: stopping the scenario" % limit)
        signal_group(signal.SIGTERM)
        # what ignores the TERM (an ssh, a container's exec) is killed a little later
        killer = threading.Timer(30, signal_group, (signal.SIGKILL,))
        killer.daemon = True
        killer.start()

    timer = threading.Timer(limit, stop)
    timer.start()
    causes: collections.deque[str] = collections.deque(maxlen=CAUSES)
    for line in process.stdout:
        say(scenario, line)
        if CAUSE.match(line):
            causes.append(line.rstrip("\n")[:WIDTH])
    rc = process.wait()
    timer.cancel()
    if expired.is_set():
        rc = 124
    took = time.monotonic() - started
    say(scenario, verdict(scenario, rc, took))
    return scenario, rc, took, list(causes)


def plan(scenarios: list[str]) -> tuple[list[str], list[str]]:
    """The scenarios that may run side by side, in the order they start (the longest
    first), and those that run afterwards, one at a time with nothing beside them."""
    shared = [s for s in scenarios if s not in ALONE]
    first = [s for s in LONGEST + EARLY if s in shared]
    return first + [s for s in shared if s not in first], [s for s in scenarios if s in ALONE]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("MOLECULE_JOBS", "2")))
    parser.add_argument("--limit", type=float, default=float(os.environ.get("MOLECULE_SCENARIO_LIMIT", "4500")),
                        help="seconds a scenario may take before it is stopped (default 4500; CI's own limit "
                             "for the whole run is 5,400)")
    parser.add_argument("--part", choices=("all", "shared", "alone"), default="all",
                        help="all: the scenarios side by side, then those that run alone; shared: the first "
                             "only; alone: the second only")
    parser.add_argument("scenarios", nargs="+")
    args = parser.parse_args(argv)
    molecule = os.environ.get("MOLECULE") or os.path.join(os.path.dirname(sys.executable), "molecule")
    order, alone = plan(args.scenarios)
    order, alone = (order if args.part != "alone" else []), (alone if args.part != "shared" else [])
    # Two workers take the scenarios in that order, each the next one as it ends the last:
    # serve beside the operator's path, then beside the rest; when serve ends before them,
    # its worker takes the ones left (a worker held on serve alone stood idle for the last
    # 200-300 s of CI while the other ran them).
    with concurrent.futures.ThreadPoolExecutor(max(1, min(args.jobs, 2))) as pool:
        results = list(pool.map(lambda scenario: run(scenario, molecule, args.limit), order))
    results += [run(s, molecule, args.limit) for s in alone]
    for scenario, rc, took, _causes in results:
        print(verdict(scenario, rc, took))
    failed = [scenario for scenario, rc, _took, _causes in results if rc != 0]
    for scenario, rc, _took, causes in results:
        if rc != 0:
            print("%s failed; the last lines that say why:" % scenario)
            for line in causes or ["(none printed: read the scenario's lines above)"]:
                print("  " + line)
    print("molecule: %d scenario(s), %s" % (len(results), "failed: " + ", ".join(failed) if failed else "all passed"),
          flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
