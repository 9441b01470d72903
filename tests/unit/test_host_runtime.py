from __future__ import annotations

import os
import re
import subprocess

import pytest
from ansible.module_utils.host_runtime import disk_space, glibc_version


def test_glibc_version_is_the_one_ldd_reports():
    """ldd --version ("ldd (Debian GLIBC 2.36-9+deb12u10) 2.36"): the C library's own word."""
    ldd = subprocess.run(["ldd", "--version"], capture_output=True, text=True, check=True).stdout
    assert glibc_version() == re.match(r"ldd \(.*\) (\d+\.\d+)$", ldd.splitlines()[0]).group(1)


@pytest.mark.parametrize("answer", ["musl libc", "", OSError("confstr: no such name")])
def test_a_host_without_glibc_has_no_glibc_version(monkeypatch, answer):
    def confstr(name):
        if isinstance(answer, Exception):
            raise answer
        return answer
    monkeypatch.setattr(os, "confstr", confstr)
    assert glibc_version() is None


def test_disk_space_of_a_path_that_does_not_exist_yet(tmp_path):
    space = disk_space(str(tmp_path / "models" / "org" / "repo"))
    assert space["measured_at"] == str(tmp_path)
    assert 0 < space["free_bytes"] <= space["total_bytes"]


def test_module_sets_facts(run_module, tmp_path):
    facts = run_module("host_runtime_facts", {"disk_paths": [str(tmp_path / "x")]})["ansible_facts"]
    assert facts["host_runtime"]["disk"][0]["measured_at"] == str(tmp_path)
    assert facts["host_runtime"]["python_version"].count(".") == 2


def test_find_pythons_reports_version_and_venv_support(tmp_path):
    import sys

    from ansible.module_utils.host_runtime import find_pythons

    link = tmp_path / "python3.11"
    link.symlink_to(sys.executable)
    (tmp_path / "python3-config").write_text("#!/bin/sh\n")
    (found,) = find_pythons([str(tmp_path / "python3*")])
    assert found["path"] == str(link)
    assert found["version"].startswith("%d.%d." % sys.version_info[:2]) and found["venv"] is True


def test_wheel_compat_module_refuses_with_the_reason(run_module):
    result = run_module("wheel_compat", {
        "wheels": ["/srv/wh/vllm-0.20.0-cp38-abi3-manylinux_2_35_x86_64.whl",
                   "transformers-5.19.0-py3-none-any.whl"],
        "python_version": "3.11", "glibc_version": "2.31", "machine": "x86_64",
        "variable": "vllm_runtime_wheelhouse"})
    assert result["failed"]
    assert result["msg"] == ("vllm_runtime_wheelhouse: 1 wheel(s) cannot install on this host "
                             "(Python 3.11, glibc 2.31, x86_64): "
                             "vllm-0.20.0-cp38-abi3-manylinux_2_35_x86_64.whl needs glibc 2.35, host has 2.31")
    ok = run_module("wheel_compat", {"wheels": ["transformers-5.19.0-py3-none-any.whl"]})
    assert ok["wheels"][0]["compatible"] and ok["host"]["machine"]
