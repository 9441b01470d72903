#!/usr/bin/env python3
"""Run molecule scenarios, the longest beside the others.

`make molecule` calls it.  Scenario `serve` (a whole fleet, its rollouts under load)
takes most of the time and the others mostly wait on apt and Ansible, so by default
`serve` runs beside the others, which run one after another (--jobs 1: every scenario
one after another).  Each scenario's output is printed whole when it ends, with its
time; the exit status is non-zero when any scenario failed.

    molecule_all.py [--jobs 1|2] SCENARIO ...
"""
from __future__ import annotations

import argparse
import concurrent.futures
import os
import subprocess
import sys
import tempfile
import threading
import time

# The scenarios that take longest first (seconds on the 2-core test machine); the others
# after them in the order given.
LONGEST = ("serve",)
PRINT = threading.Lock()


def run(scenario: str, molecule: str) -> tuple[str, int, float]:
    started = time.monotonic()
    with tempfile.TemporaryFile("w+") as log:
        rc = subprocess.call([molecule, "test", "-s", scenario], stdout=log, stderr=subprocess.STDOUT)
        took = time.monotonic() - started
        log.seek(0)
        with PRINT:
            sys.stdout.write(log.read())
            print("molecule scenario %s: %ds%s" % (scenario, took, "" if rc == 0 else " (FAILED, rc %d)" % rc),
                  flush=True)
    return scenario, rc, took


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("MOLECULE_JOBS", "2")))
    parser.add_argument("scenarios", nargs="+")
    args = parser.parse_args(argv)
    molecule = os.path.join(os.path.dirname(sys.executable), "molecule")
    order = [s for s in LONGEST if s in args.scenarios] + [s for s in args.scenarios if s not in LONGEST]
    if args.jobs <= 1:
        results = [run(s, molecule) for s in order]
    else:
        # one worker: the longest; the other: the rest, one after another
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            head = [pool.submit(run, s, molecule) for s in order[:1]]
            rest = pool.submit(lambda: [run(s, molecule) for s in order[1:]])
            results = [f.result() for f in head] + rest.result()
    failed = [scenario for scenario, rc, _took in results if rc != 0]
    print("molecule: %d scenario(s), %s" % (len(results), "failed: " + ", ".join(failed) if failed else "all passed"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
