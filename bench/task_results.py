#!/usr/bin/env python3
"""Task results per role and host of ansible-playbook runs (the default callback's output).

Each result is a round trip, a fork and a callback on the control node, whatever its status
(bench/results/fleet-scale/README.md): this counts them per role, split into ok/changed and
skipped, for one host, and puts runs side by side:

    python3 bench/task_results.py --host node1 before.log after.log
"""
from __future__ import annotations

import argparse
import collections
import re
import sys

RESULT = re.compile(r"^(ok|changed|skipping|failed|fatal): \[([^\]]+)\]")


def count(text: str, host: str) -> dict:
    """{role: Counter(done=, skipped=)} of ``host``'s results (a loop's items each count)."""
    found: dict = collections.defaultdict(collections.Counter)
    role = "(play)"
    for line in text.splitlines():
        if line.startswith("TASK ["):
            name = line[len("TASK ["):].split("]")[0]
            role = name.split(" : ")[0] if " : " in name else "(play)"
            continue
        match = RESULT.match(line)
        if match and match.group(2).split(" ")[0] == host:
            found[role]["skipped" if match.group(1) == "skipping" else "done"] += 1
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", required=True)
    parser.add_argument("logs", nargs="+")
    args = parser.parse_args(argv)
    runs = [count(open(path, encoding="utf-8", errors="replace").read(), args.host) for path in args.logs]
    roles = sorted(set().union(*runs), key=lambda r: -sum(sum(run[r].values()) for run in runs))
    print("| role | " + " | ".join("%s: run / skipped" % path.rsplit("/", 1)[-1] for path in args.logs) + " |")
    print("|---|" + "---|" * len(runs))
    for role in roles + ["all"]:
        cells = []
        for run in runs:
            tally = run[role] if role != "all" else sum(run.values(), collections.Counter())
            cells.append("%d / %d" % (tally["done"], tally["skipped"]))
        print("| %s | %s |" % (role, " | ".join(cells)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
