from __future__ import annotations

import os

from ansible.module_utils.host_runtime import disk_space, glibc_version


def test_glibc_version_is_read_like_pip():
    version = glibc_version()
    assert version is not None and version == os.confstr("CS_GNU_LIBC_VERSION").split()[1]


def test_disk_space_of_a_path_that_does_not_exist_yet(tmp_path):
    space = disk_space(str(tmp_path / "models" / "org" / "repo"))
    assert space["measured_at"] == str(tmp_path)
    assert 0 < space["free_bytes"] <= space["total_bytes"]


def test_module_sets_facts(run_module, tmp_path):
    facts = run_module("host_runtime_facts", {"disk_paths": [str(tmp_path / "x")]})["ansible_facts"]
    assert facts["host_runtime"]["disk"][0]["measured_at"] == str(tmp_path)
    assert facts["host_runtime"]["python_version"].count(".") == 2
