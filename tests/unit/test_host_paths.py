"""The inventory's paths that reach unit files and command lines (module_utils/host_paths.py)."""
from __future__ import annotations

import pytest
from ansible.module_utils.host_paths import problem, problems


@pytest.mark.parametrize("path", ["/opt/vllm", "/var/lib/olah", "/usr/local/Ascend", "/data/models-2+x/v1.0_a"])
def test_a_plain_absolute_path_passes(path):
    assert problem("vllm_runtime_root", path) == ""


@pytest.mark.parametrize("path, why", [
    ("/opt/vllm fleet", "a space splits ExecStart= into two words"),
    ("/var/lib/olah-%H", "systemd replaces %H with the host name"),
    ("/opt/$HOME", "systemd expands $HOME in ExecStart="),
    ("/usr/local/Ascend'; reboot; '", "the quote ends bash -c's string"),
    ("opt/vllm", "relative: resolved against the unit's working directory"),
    ("/opt/../etc", "leaves the tree it names"),
    ("/opt/./vllm", "a '.' part"),
    ("/opt/vllm/", "a trailing slash doubles the next one"),
    ("/", "the root itself"),
    ("", "empty"),
    ("/opt/vllm\nExecStartPre=/bin/sh", "a line break starts a directive of its own"),
    ("/opt/vllm\n", "a line break at the end ends the line early"),
    (7, "not a string"),
])
def test_a_path_a_unit_would_misread_is_refused_by_name(path, why):
    message = problem("hf_mirror_root", path)
    assert message.startswith("hf_mirror_root: %r is not an absolute path" % (path,)), why
    assert "'%' is a systemd specifier" in message


def test_each_bad_path_is_named():
    assert problems({"vllm_runtime_root": "/opt/vllm", "hf_mirror_root": "/var/lib/olah"}) == []
    found = problems({"vllm_runtime_root": "/opt/a b", "ascend_cann_root": "/usr/local/Ascend", "hf_mirror_root": "srv"})
    assert [f.split(":")[0] for f in found] == ["hf_mirror_root", "vllm_runtime_root"]
