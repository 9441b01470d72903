from __future__ import annotations

import pytest
from ansible.module_utils.runtime_check import choose_python, driver_problem, pick_release

ASCEND = {"default": "0.23.0", "versions": {
    "0.23.0": {"python": ["3.10", "3.13"], "glibc_min": "2.34"},
    "0.18.0": {"python": ["3.10", "3.12"], "glibc_min": "2.24"}}}
DEBIAN12 = [{"path": "/usr/bin/python3.11", "version": "3.11.2", "venv": False}]


def test_kylin_glibc_228_gets_the_newest_ascend_release_that_installs():
    assert pick_release(ASCEND, "", "2.28") == ("0.18.0", None)
    assert pick_release(ASCEND, "", "2.35") == ("0.23.0", None)


def test_unknown_or_impossible_release():
    assert "not in the release matrix (0.18.0, 0.23.0)" in pick_release(ASCEND, "0.99.0", "2.35")[1]
    assert "no release of the matrix installs on glibc 2.17" in pick_release(ASCEND, "", "2.17")[1]


def test_python_ready_to_use_prefers_the_newest_in_range():
    pythons = [{"path": "/usr/bin/python3.11", "version": "3.11.2", "venv": True},
               {"path": "/usr/local/bin/python3.13", "version": "3.13.1", "venv": True},
               {"path": "/usr/bin/python3.15", "version": "3.15.0", "venv": True}]
    assert choose_python(pythons, "3.11", "3.15", [], "") == {
        "action": "use", "path": "/usr/local/bin/python3.13", "version": "3.13"}


def test_debian12_python_without_venv_module_installs_the_package():
    choice = choose_python(DEBIAN12, "3.11", "3.15", ["python3.11", "python3.11-venv"], "")
    assert choice == {"action": "packages", "packages": ["python3.11", "python3.11-venv"],
                      "path": "/usr/bin/python3.11", "version": "3.11"}


def test_debian11_python_too_old():
    debian11 = [{"path": "/usr/bin/python3.9", "version": "3.9.2", "venv": True}]
    assert choose_python(debian11, "3.11", "3.15", [], "/srv/cpython-3.11.tar.gz")["action"] == "archive"
    none = choose_python(debian11, "3.11", "3.15", [], "")
    assert none["action"] == "none"
    assert none["problem"].startswith("vllm_runtime_python_archive: this release needs Python >= 3.11 "
                                      "and < 3.15; the host has /usr/bin/python3.9 3.9.2")


@pytest.mark.parametrize("driver,problem", [("580.159.04", False), ("590.10", False),
                                            ("570.172.08", True), (None, False)])
def test_driver_branch(driver, problem):
    assert bool(driver_problem(driver, 580)) is problem
