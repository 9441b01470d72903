"""What a change of one host's instances is (module_utils/service_state.py): the files that
differ, the instances that restart or retire, what a rollback has to put back, the ports
open meanwhile, and the gate's instances on both sides of the change."""
from __future__ import annotations

from ansible.module_utils.service_state import files, local_url, plan
from ansible.module_utils.vllm_config import render

PATHS = {"config_dir": "/etc/vllm", "next_dir": "/etc/vllm/next", "unit": "/etc/systemd/system/vllm@.service",
         "user": "vllm"}
UNIT = "[Service]\nExecStart=/opt/vllm/bin/vllm serve --config /etc/vllm/%i.yaml\n"


def instance(name, port, **args):
    return {"name": name, "port": port, "args": dict({"host": "0.0.0.0", "port": port}, **args)}


def disk(live: dict, staged: dict, unit=UNIT, staged_unit=UNIT) -> dict:
    """The host's files: live {name: settings}, staged {name: settings}, env unchanged."""
    found = {PATHS["unit"]: unit, PATHS["next_dir"] + "/vllm@.service": staged_unit}
    for folder, configs in ((PATHS["config_dir"], live), (PATHS["next_dir"], staged)):
        for name, settings in configs.items():
            found["%s/%s.yaml" % (folder, name)] = render(settings)
            found["%s/%s.env" % (folder, name)] = 'VLLM_API_KEY="k"\n'
    return found


def state(instances, live, staged, **kwargs):
    text = disk(live, staged, **{k: kwargs.pop(k) for k in ("unit", "staged_unit") if k in kwargs})
    return plan(instances, list(live), text.get, model_path="/m/b", version="0.33.0", **PATHS, **kwargs)


def test_a_converged_host_changes_nothing_and_keeps_what_serves():
    settings = {"model": "/m/b", "host": "0.0.0.0", "port": 8000}
    result = state([instance("main", 8000)], {"main": settings}, {"main": settings})
    assert result["changed_files"] == [] and result["stale"] == [] and result["retired"] == [] and result["change"] == ""
    assert result["serving"] and result["before"] == ["main"]
    assert result["ports"] == result["ports_before"] == result["ports_changing"] == [8000]


def test_a_flag_change_restarts_that_instance_alone_and_says_both_values():
    old = {"model": "/m/b", "host": "0.0.0.0", "port": 8000, "max-num-seqs": 8}
    result = state([instance("a", 8000), instance("b", 8001)],
                   {"a": old, "b": dict(old, port=8001)},
                   {"a": dict(old, **{"max-num-seqs": 16}), "b": dict(old, port=8001)})
    assert result["changed_files"] == ["a.yaml"] and result["stale"] == ["a"]
    assert result["change"] == "a.yaml: max-num-seqs: 8 -> 16"


def test_a_unit_change_restarts_every_instance():
    settings = {"model": "/m/b", "port": 8000}
    result = state([instance("a", 8000), instance("b", 8001)], {"a": settings, "b": dict(settings, port=8001)},
                   {"a": settings, "b": dict(settings, port=8001)}, staged_unit=UNIT + "Nice=5\n")
    assert result["changed_files"] == ["vllm@.service"] and result["stale"] == ["a", "b"]
    assert result["details"] == {"vllm@.service": ["+ Nice=5"]}


def test_check_mode_counts_what_staging_would_change():
    """In check mode next/ holds the last run's files: what the staging tasks say counts."""
    settings = {"model": "/m/b", "port": 8000}
    result = state([instance("main", 8000)], {"main": settings}, {"main": settings}, staged_changed=["main.env"])
    assert result["changed_files"] == ["main.env"] and result["stale"] == ["main"]


def test_a_port_change_keeps_both_ports_open_and_the_rollback_knows_the_old_one():
    old = {"model": "/m/a", "host": "10.0.0.5", "port": 8000, "served-model-name": "gemma",
           "shutdown-timeout": 60}
    result = state([instance("main", 8100, **{"served-model-name": "gemma"})], {"main": old},
                   {"main": dict(old, port=8100, model="/m/b", host="0.0.0.0")})
    assert result["ports"] == [8100] and result["ports_before"] == [8000]
    assert result["ports_changing"] == [8000, 8100]
    assert result["gate"] == [{"name": "main", "url": "http://127.0.0.1:8100", "model": "gemma", "root": "/m/b",
                               "version": "0.33.0", "headless": False}]
    assert result["gate_before"] == [{"name": "main", "url": "http://10.0.0.5:8000", "model": "gemma",
                                      "root": "/m/a", "version": "", "headless": False, "shutdown_timeout": 60}]


def test_a_retired_instance_is_drained_and_kept_with_every_file_that_served():
    settings = {"model": "/m/b", "port": 8000}
    result = state([instance("a", 8000)], {"a": settings, "old": dict(settings, port=8001)}, {"a": settings})
    assert result["retired"] == ["old"] and result["stale"] == [] and result["ports_changing"] == [8000, 8001]
    assert [item["name"] for item in result["kept"]] == ["vllm@.service", "a.yaml", "a.env", "old.yaml", "old.env"]
    assert [item["name"] for item in result["gate_before"]] == ["a", "old"]


def test_a_new_host_serves_nothing_before_and_keeps_nothing():
    result = state([instance("main", 8000)], {}, {"main": {"model": "/m/b", "port": 8000}}, unit=None)
    assert not result["serving"] and result["kept"] == [] and result["gate_before"] == []
    assert result["changed_files"] == ["vllm@.service", "main.yaml", "main.env"] and result["stale"] == ["main"]
    assert result["details"]["main.yaml"] == ["new"]


def test_a_host_that_leaves_reads_what_serves_without_a_plan():
    settings = {"model": "/m/a", "port": 8003, "headless": True}
    result = state([], {"w": settings}, {})
    assert result["files"] == [] and result["changed_files"] == [] and result["retired"] == ["w"]
    assert result["settings"] == {"w": settings} and result["gate_before"][0]["headless"] is True


def test_the_files_carry_the_owner_and_mode_of_each_kind():
    found = {item["name"]: item for item in files(["main"], **{k: PATHS[k] for k in ("config_dir", "unit", "user")})}
    assert (found["main.yaml"]["group"], found["main.yaml"]["mode"], found["main.yaml"]["kind"]) == ("vllm", "0640", "config")
    assert (found["main.env"]["group"], found["main.env"]["mode"], found["main.env"]["kind"]) == ("root", "0600", "secret")
    assert found["vllm@.service"]["live"] == PATHS["unit"]


def test_a_wildcard_bind_is_asked_on_loopback():
    assert [local_url(host, 8000) for host in ("0.0.0.0", "::", "", None, "10.0.0.5")] == \
        ["http://127.0.0.1:8000"] * 4 + ["http://10.0.0.5:8000"]


def test_the_module_reads_the_host_and_never_shows_the_environment(run_module, tmp_path):
    (tmp_path / "next").mkdir()
    (tmp_path / "next" / "main.yaml").write_text(render({"model": "/m/b", "port": 8000}))
    (tmp_path / "main.yaml").write_text(render({"model": "/m/a", "port": 8000}))
    (tmp_path / "next" / "main.env").write_text('VLLM_API_KEY="new-secret"\n')
    (tmp_path / "main.env").write_text('VLLM_API_KEY="old-secret"\n')
    (tmp_path / "vllm@.service").write_text(UNIT)
    (tmp_path / "next" / "vllm@.service").write_text(UNIT)
    result = run_module("vllm_service_state", {
        "instances": [instance("main", 8000)], "config_dir": str(tmp_path), "next_dir": str(tmp_path / "next"),
        "unit": str(tmp_path / "vllm@.service"), "model_path": "/m/b", "version": "0.33.0"}, check_mode=True)
    assert result["changed"] is False and result["changed_files"] == ["main.yaml", "main.env"]
    assert result["details"] == {"main.yaml": ['model: "/m/a" -> "/m/b"'], "main.env": ["values changed (not shown)"]}
    assert result["settings"] == {"main": {"model": "/m/a", "port": 8000}} and result["stale"] == ["main"]
    assert "new-secret" not in str(result) and "old-secret" not in str(result)


def test_after_a_rollback_restaging_what_runs_is_no_change_but_check_mode_still_predicts(run_module, tmp_path):
    """next/ held the failed change; the run that stages the running configuration again
    reports its staging changed, and must not restart what serves (a check run, whose
    staged files are not written, does count it)."""
    (tmp_path / "next").mkdir()
    for folder in (tmp_path, tmp_path / "next"):
        (folder / "main.yaml").write_text(render({"model": "/m/b", "port": 8000}))
        (folder / "main.env").write_text('VLLM_API_KEY="k"\n')
        (folder / "vllm@.service").write_text(UNIT)
    args = {"instances": [instance("main", 8000)], "config_dir": str(tmp_path), "next_dir": str(tmp_path / "next"),
            "unit": str(tmp_path / "vllm@.service"), "staged_changed": ["main.yaml", "main.env"]}
    real = run_module("vllm_service_state", args)
    assert real["changed_files"] == [] and real["stale"] == []
    check = run_module("vllm_service_state", args, check_mode=True)
    assert check["changed_files"] == ["main.yaml", "main.env"] and check["stale"] == ["main"]
