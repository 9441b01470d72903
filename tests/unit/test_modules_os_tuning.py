"""library/sysctl_check.py and library/transparent_hugepage.py run as Ansible runs them."""
from __future__ import annotations


def test_sysctl_check_returns_normalised_settings(run_module, tmp_path):
    (tmp_path / "vm").mkdir()
    (tmp_path / "vm" / "swappiness").write_text("60\n")
    result = run_module("sysctl_check", {"settings": {"vm.swappiness": 0}, "proc_root": str(tmp_path)})
    assert result["changed"] is False
    assert result["settings"] == {"vm.swappiness": "0"}


def test_sysctl_check_fails_naming_the_variable(run_module, tmp_path):
    result = run_module("sysctl_check", {"settings": {"vm.swappiness": 500},
                                         "variable": "os_tuning_sysctl", "proc_root": str(tmp_path)})
    assert result["failed"] is True
    assert result["msg"].startswith("os_tuning_sysctl['vm.swappiness']=500 is out of range")


def test_sysctl_check_merges_extra_and_lists_what_is_not_in_place(run_module, tmp_path):
    for key, live in (("swappiness", "60\n"), ("max_map_count", "1048576\n")):
        (tmp_path / "vm").mkdir(exist_ok=True)
        (tmp_path / "vm" / key).write_text(live)
    conf = tmp_path / "90-vllm-fleet.conf"
    conf.write_text("vm.swappiness=0\nvm.max_map_count=1048576\n")
    result = run_module("sysctl_check", {"settings": {"vm.swappiness": 0, "vm.max_map_count": 65530},
                                         "extra": {"vm.max_map_count": 1048576},
                                         "sysctl_file": str(conf), "proc_root": str(tmp_path)})
    assert result["settings"] == {"vm.swappiness": "0", "vm.max_map_count": "1048576"}
    assert result["drift"] == {"vm.swappiness": "0"}


def test_sysctl_check_names_the_extra_variable(run_module, tmp_path):
    (tmp_path / "vm").mkdir()
    (tmp_path / "vm" / "swappiness").write_text("60\n")
    result = run_module("sysctl_check", {"settings": {"vm.swappiness": 0}, "extra": {"vm.swappiness": 300},
                                         "extra_variable": "os_tuning_sysctl_extra",
                                         "proc_root": str(tmp_path)})
    assert result["failed"] is True
    assert result["msg"].startswith("os_tuning_sysctl_extra['vm.swappiness']=300 is out of range")


def _thp(tmp_path, enabled="[always] madvise never", defrag="always defer defer+madvise [madvise] never"):
    (tmp_path / "enabled").write_text(enabled + "\n")
    (tmp_path / "defrag").write_text(defrag + "\n")
    return {"sysfs_root": str(tmp_path)}


def test_thp_changes_then_is_idempotent(run_module, tmp_path):
    args = dict(_thp(tmp_path), enabled="never", defrag="never")
    first = run_module("transparent_hugepage", args, diff=True)
    assert first["changed"] is True
    assert first["before"] == {"enabled": "always", "defrag": "madvise"}
    assert first["diff"] == {"before": "defrag: madvise\nenabled: always\n",
                             "after": "defrag: never\nenabled: never\n"}
    # The kernel shows the new mode bracketed; emulate that and run again.
    _thp(tmp_path, "always madvise [never]", "always defer defer+madvise madvise [never]")
    assert run_module("transparent_hugepage", args)["changed"] is False


def test_thp_check_mode_reports_but_does_not_write(run_module, tmp_path):
    args = dict(_thp(tmp_path), enabled="never")
    assert run_module("transparent_hugepage", args, check_mode=True)["changed"] is True
    assert (tmp_path / "enabled").read_text() == "[always] madvise never\n"


def test_thp_rejects_off(run_module, tmp_path):
    result = run_module("transparent_hugepage", dict(_thp(tmp_path), enabled="off"))
    assert result["failed"] is True
    assert "value of enabled must be one of: always, madvise, never, got: off" in result["msg"]
