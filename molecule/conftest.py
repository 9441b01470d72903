"""Shared by every scenario's testinfra tests: on a failure, print the host's journal;
``--files-reversed`` runs the shared checks first, then the scenario's files in reverse order,
each file's tests in their own (molecule.yml's verifier options turn it on: no file passes
because one before it left something behind)."""
from __future__ import annotations

from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parent / "resources" / "tests"


def pytest_addoption(parser):
    parser.addoption("--files-reversed", action="store_true",
                     help="run the shared checks first, then the test files in reverse order, each file's tests "
                          "in the order written")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--files-reversed"):
        # The checks every scenario shares (molecule/resources/tests: check mode on the
        # converged hosts) first, on the fleet as converge left it, then the scenario's files.
        files = list(dict.fromkeys(item.path for item in items))
        items.sort(key=lambda item: (SHARED not in item.path.resolve().parents, -files.index(item.path)))


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


@pytest.fixture
def exporter_series():
    """``exporter_series(host, port)`` -> the series names the host's exporter serves on
    the fleet's exporter address (its default IPv4 address, as vllm_fleet_exporter_address)."""
    def scrape(host, port: int) -> set:
        address = host.ansible("setup", "gather_subset=network")["ansible_facts"]["ansible_default_ipv4"]["address"]
        text = host.check_output("python3 -c \"import urllib.request; print(urllib.request.urlopen("
                                 "'http://%s:%d/metrics', timeout=10).read().decode())\"" % (address, port))
        return {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}
    return scrape
