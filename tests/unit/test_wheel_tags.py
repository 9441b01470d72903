"""wheel_tags against real wheel names and against packaging.tags (what pip uses)."""
from __future__ import annotations

import itertools

import pytest
from ansible.module_utils.wheel_tags import (WheelNameError, check_wheel, parse_wheel,
                                             supported_platforms)
from packaging import _manylinux
from packaging import tags as ptags
from packaging.utils import parse_wheel_filename

# Real file names from PyPI.
VLLM_020 = "vllm-0.20.0-cp38-abi3-manylinux_2_35_x86_64.whl"
VLLM_033 = "vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl"
VLLM_011 = "vllm-0.11.0-cp38-abi3-manylinux1_x86_64.whl"
VLLM_ASCEND_023 = "vllm_ascend-0.23.0-cp311-cp311-manylinux_2_34_aarch64.whl"
VLLM_ASCEND_018 = "vllm_ascend-0.18.0-cp311-cp311-manylinux_2_24_aarch64.manylinux_2_28_aarch64.whl"
TORCH_311 = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
TORCH_312 = "torch-2.14.0-cp312-cp312-manylinux_2_28_x86_64.whl"
NUMPY = "numpy-2.3.5-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl"
PURE = "transformers-5.19.0-py3-none-any.whl"
KYLIN = {"glibc": "2.28", "machine": "x86_64"}


@pytest.mark.parametrize("wheel,python,glibc,machine,ok,reason", [
    (VLLM_033, "3.11", "2.28", "x86_64", True, ""),                     # Kylin V10 takes vLLM 0.33
    (VLLM_020, "3.11", "2.28", "x86_64", False, "needs glibc 2.35, host has 2.28"),
    (VLLM_020, "3.11", "2.31", "x86_64", False, "needs glibc 2.35, host has 2.31"),  # Debian 11
    (VLLM_020, "3.11", "2.35", "x86_64", True, ""),
    (VLLM_011, "3.11", "2.28", "x86_64", False, "needs glibc 2.32 (its tag understates it)"),
    (VLLM_ASCEND_023, "3.11", "2.28", "aarch64", False, "needs glibc 2.34, host has 2.28"),
    (VLLM_ASCEND_018, "3.11", "2.28", "aarch64", True, ""),
    (VLLM_ASCEND_018, "3.11", "2.28", "x86_64", False, "built for aarch64, host is x86_64"),
    (TORCH_311, "3.11", "2.36", "x86_64", True, ""),
    (TORCH_312, "3.11", "2.36", "x86_64", False, "cp312-cp312 only, host python 3.11"),
    (TORCH_312, "3.12", "2.39", "x86_64", True, ""),
    (NUMPY, "3.11", "2.27", "x86_64", True, ""),
    (PURE, "3.9", None, "x86_64", True, ""),
])
def test_real_wheels(wheel, python, glibc, machine, ok, reason):
    result = check_wheel(wheel, python, glibc, machine)
    assert result["compatible"] is ok
    assert reason in result["reason"]


def test_both_reasons_are_given():
    result = check_wheel(TORCH_312, "3.9", "2.17", "x86_64")
    assert result["reason"] == ("cp312-cp312 only, host python 3.9; "
                                "needs glibc 2.28, host has 2.17")


def test_not_a_wheel_name():
    with pytest.raises(WheelNameError):
        parse_wheel("vllm-0.33.0.tar.gz")


def pip_platforms(glibc: str, machine: str) -> list:
    """The platform tags packaging (pip) generates on a host of that glibc and machine:
    its own manylinux logic, told the host's glibc and that the interpreter is built for
    ``machine`` (it reads both from the running interpreter), not the code under test."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_manylinux, "_get_glibc_version", lambda: tuple(int(p) for p in glibc.split(".")))
        patch.setattr(_manylinux, "_have_compatible_abi", lambda executable, archs: True)
        return list(_manylinux.platform_tags([machine])) + ["linux_%s" % machine]


def pip_accepts(wheel: str, python: tuple, glibc: str, machine: str) -> bool:
    """What packaging.tags (pip) says, for an interpreter/glibc we are not running on."""
    platforms = pip_platforms(glibc, machine)
    supported = set(itertools.chain(
        ptags.cpython_tags(python, platforms=platforms),
        ptags.compatible_tags(python, "cp%d%d" % python, platforms=platforms)))
    return bool(parse_wheel_filename(wheel)[3] & supported)


@pytest.mark.parametrize("wheel", [VLLM_020, VLLM_033, VLLM_ASCEND_023, VLLM_ASCEND_018, TORCH_311,
                                   TORCH_312, NUMPY, PURE,
                                   "cffi-2.0.0-cp312-cp312-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
                                   "six-1.17.0-py2.py3-none-any.whl",
                                   "orjson-3.11.0-cp311-cp311-musllinux_1_2_x86_64.whl",
                                   "pyyaml-6.0.3-cp311-cp311-manylinux1_x86_64.whl"])
@pytest.mark.parametrize("python,glibc,machine", [((3, 11), "2.28", "x86_64"), ((3, 11), "2.31", "x86_64"),
                                                  ((3, 12), "2.39", "x86_64"), ((3, 11), "2.28", "aarch64"),
                                                  ((3, 9), "2.31", "x86_64")])
def test_same_answer_as_packaging(wheel, python, glibc, machine):
    ours = check_wheel(wheel, "%d.%d" % python, glibc, machine)["compatible"]
    assert ours == pip_accepts(wheel, python, glibc, machine)


@pytest.mark.parametrize("glibc,machine", [("2.17", "x86_64"), ("2.28", "x86_64"), ("2.31", "x86_64"),
                                           ("2.39", "x86_64"), ("2.28", "aarch64"), ("2.34", "aarch64")])
def test_the_platforms_downloaded_for_are_the_ones_pip_accepts(glibc, machine):
    ours = supported_platforms(glibc, machine)
    assert ours[0] == "manylinux_%s_%s" % (glibc.replace(".", "_"), machine)
    assert sorted(ours) == sorted(pip_platforms(glibc, machine))


def test_supported_platforms_cover_the_legacy_aliases():
    platforms = supported_platforms("2.28", "x86_64")
    assert platforms[0] == "manylinux_2_28_x86_64" and "manylinux_2_5_x86_64" in platforms
    assert {"manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64",
            "linux_x86_64"} <= set(platforms)
    assert "manylinux_2_29_x86_64" not in platforms
