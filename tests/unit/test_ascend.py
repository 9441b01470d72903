"""Ascend install ordering (the CANN/vllm-ascend check runs in molecule: ascend_cann)."""
from __future__ import annotations

import pytest
from ansible.module_utils.ascend import AscendError, parse_version_info, steps

ALL = {"driver": "25.2.0", "firmware": "7.7.0", "toolkit": "9.1.0", "kernels": "9.1.0", "nnal": "9.1.0"}


def order(installed, wanted):
    return [(s["component"], " ".join(s["args"])) for s in steps(installed, wanted)]


def test_first_install_goes_driver_then_firmware_then_cann():
    assert order({}, ALL) == [("driver", "--full --install-for-all"), ("firmware", "--full"),
                              ("toolkit", "--full"), ("kernels", "--install"), ("nnal", "--install")]


def test_an_upgrade_goes_firmware_first():
    wanted = dict(ALL, driver="25.3.0", firmware="7.8.0")
    assert order(ALL, wanted) == [("firmware", "--upgrade"), ("driver", "--upgrade")]


def test_nothing_to_do_when_versions_match_and_unmanaged_parts_are_left_alone():
    assert order(ALL, ALL) == []
    assert order({"driver": "1.0"}, {"toolkit": "9.1.0"}) == [("toolkit", "--full")]


def test_unknown_components_are_named():
    with pytest.raises(AscendError, match="unknown component.*npu-tools"):
        steps({}, {"npu-tools": "1"})


def test_version_info_formats():
    assert parse_version_info("Version=25.2.0\n") == "25.2.0"
    assert parse_version_info("package_name=x\nversion: 9.1.0.alpha001\n") == "9.1.0.alpha001"
    assert parse_version_info("") is None
