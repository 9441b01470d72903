"""Shared by every scenario's testinfra tests: on a failure, print the host's journal."""
from __future__ import annotations

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    host = item.funcargs.get("host")
    if host is None:
        return
    journal = host.run("journalctl --no-pager -n 80 -o short-precise")
    report.sections.append(("journal of %s" % host.backend.get_hostname(),
                            journal.stdout or journal.stderr))
