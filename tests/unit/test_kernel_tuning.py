from __future__ import annotations

from pathlib import Path

import pytest

from ansible.module_utils.kernel_tuning import (TuningError, merge_sysctl, normalize_value, parse_thp,
                                               sysctl_drift, thp_apply, thp_plan, validate_sysctl)

DEFAULTS = {"net.core.somaxconn": 65535, "net.ipv4.tcp_max_syn_backlog": 65535,
            "vm.swappiness": 0, "vm.overcommit_memory": 1}


@pytest.fixture
def proc(tmp_path):
    """A /proc/sys with the parameters the defaults name, plus vm.max_map_count."""
    for key in list(DEFAULTS) + ["vm.max_map_count", "net.ipv4.ip_local_port_range"]:
        path = tmp_path.joinpath(*key.split("."))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("0\n")
    return str(tmp_path)


def test_defaults_pass_and_render_as_strings(proc):
    assert validate_sysctl(DEFAULTS, "os_tuning_sysctl", proc) == {
        k: str(v) for k, v in DEFAULTS.items()}


@pytest.mark.parametrize("settings,fragment", [
    ({"vm.swappiness": 500}, "os_tuning_sysctl['vm.swappiness']=500 is out of range: the kernel accepts 0 to 200"),
    ({"vm.overcommit_memory": 3}, "accepts 0 to 2"),
    ({"vm.swappiness": "high"}, "out of range"),
    ({"vm.swappiness": True}, "a boolean is not a kernel parameter value"),
    ({"vm.swapiness": 10}, "this host's kernel has no such parameter"),
    ({"VM swappiness": 10}, "is not a kernel parameter name"),
    ({"vm.max_map_count": None}, "expected an integer or a non-empty string"),
])
def test_bad_settings_name_the_variable_and_reason(proc, settings, fragment):
    with pytest.raises(TuningError) as err:
        validate_sysctl(settings, "os_tuning_sysctl", proc)
    assert fragment in str(err.value)
    assert "os_tuning_sysctl[" in str(err.value)


def test_every_problem_is_reported_at_once(proc):
    with pytest.raises(TuningError) as err:
        validate_sysctl({"vm.swappiness": 500, "vm.overcommit_memory": 9}, "v", proc)
    assert "vm.swappiness" in str(err.value) and "vm.overcommit_memory" in str(err.value)


def test_multi_value_parameters_are_normalised(proc):
    got = validate_sysctl({"net.ipv4.ip_local_port_range": "1024   65000"}, "v", proc)
    assert got == {"net.ipv4.ip_local_port_range": "1024 65000"}
    assert normalize_value([1024, 65000]) == "1024\t65000"


@pytest.mark.parametrize("text,mode", [
    ("always [madvise] never\n", "madvise"),
    ("[always] madvise never\n", "always"),
    ("always defer defer+madvise madvise [never]\n", "never"),
])
def test_parse_thp_reads_the_bracketed_mode(text, mode):
    assert parse_thp(text) == mode


@pytest.fixture
def thp(tmp_path):
    (tmp_path / "enabled").write_text("[always] madvise never\n")
    (tmp_path / "defrag").write_text("always defer defer+madvise [madvise] never\n")
    return tmp_path


def test_thp_plan_lists_only_what_differs(thp):
    assert thp_plan(str(thp), {"enabled": "never", "defrag": "madvise"}) == {
        "enabled": ("always", "never")}
    assert thp_plan(str(thp), {"enabled": "always", "defrag": None}) == {}


def test_thp_apply_writes_the_mode(thp):
    thp_apply(str(thp), {"enabled": ("always", "never"), "defrag": ("madvise", "never")})
    assert (thp / "enabled").read_text() == "never"
    assert (thp / "defrag").read_text() == "never"


def test_thp_refuses_unknown_modes_and_missing_support(thp, tmp_path):
    with pytest.raises(TuningError, match="'off' is not one of always, madvise, never"):
        thp_plan(str(thp), {"enabled": "off"})
    with pytest.raises(TuningError, match="no transparent hugepage support"):
        thp_plan(str(tmp_path / "absent"), {"enabled": "never"})


def test_a_later_layer_wins_and_each_layer_names_its_variable(proc):
    assert merge_sysctl([("os_tuning_sysctl", {"vm.swappiness": 0, "vm.max_map_count": 65530}),
                         ("os_tuning_sysctl_extra", {"vm.max_map_count": 1048576})], proc) == {
        "vm.swappiness": "0", "vm.max_map_count": "1048576"}
    with pytest.raises(TuningError) as err:
        merge_sysctl([("os_tuning_sysctl", {"vm.swappiness": 500}),
                      ("os_tuning_sysctl_extra", {"vm.swapiness": 1})], proc)
    assert "os_tuning_sysctl['vm.swappiness']=500" in str(err.value)
    assert "os_tuning_sysctl_extra['vm.swapiness']" in str(err.value)


def _live(proc, key, text):
    Path(proc).joinpath(*key.split(".")).write_text(text)


def test_a_converged_host_has_no_drift(proc, tmp_path):
    conf = tmp_path / "90-vllm-fleet.conf"
    conf.write_text("# comment\nvm.swappiness=9\nvm.swappiness = 0\nnet.ipv4.ip_local_port_range=1024 65000\n")
    _live(proc, "vm.swappiness", "0\n")
    _live(proc, "net.ipv4.ip_local_port_range", "1024\t65000\n")
    wanted = {"vm.swappiness": "0", "net.ipv4.ip_local_port_range": "1024 65000"}
    assert sysctl_drift(wanted, str(conf), proc) == {}


@pytest.mark.parametrize("conf_text,live,drifted", [
    (None, "0\n", {"vm.swappiness": "0"}),                          # no file yet
    ("vm.swappiness=0\n", "60\n", {"vm.swappiness": "0"}),          # an admin's sysctl -w
    ("vm.swappiness=60\n", "0\n", {"vm.swappiness": "0"}),          # the file edited by hand
    ("vm.swappiness=0\nvm.swappiness=60\n", "0\n", {"vm.swappiness": "0"}),  # a later line wins
    ("vm.overcommit_memory=1\n", "0\n", {"vm.swappiness": "0"}),    # its line removed
])
def test_a_missing_line_or_live_value_is_drift(proc, tmp_path, conf_text, live, drifted):
    conf = tmp_path / "90-vllm-fleet.conf"
    if conf_text is not None:
        conf.write_text(conf_text)
    _live(proc, "vm.swappiness", live)
    assert sysctl_drift({"vm.swappiness": "0"}, str(conf), proc) == drifted
