"""One host's file_sd files on a monitoring host in one call (module_utils/file_sd.py)."""
from __future__ import annotations

import fnmatch
import os
import stat

import pytest
from ansible.module_utils import file_sd
from ansible.module_utils.file_sd import FileSdError, publish, render
from ansible.plugins.filter.core import to_nice_json

UID, GID = os.getuid(), os.getgid()
VLLM = [{"targets": ["10.0.0.2:8000"], "labels": {"host": "node1", "vllm_instance": "main"}}]
NODE = [{"targets": ["10.0.0.2:9100"], "labels": {"host": "node1"}}]


def run(folder, jobs, **given):
    return publish(str(folder), "node1", jobs, UID, GID, **given)


def test_the_text_is_what_the_copy_tasks_wrote_before():
    """Files written by the tasks this module replaced (to_nice_json and a newline) stay unchanged."""
    assert render(VLLM) == to_nice_json(VLLM) + "\n"


def test_writes_each_job_with_targets_and_removes_each_job_without(tmp_path):
    (tmp_path / "vllm_health").mkdir()
    (tmp_path / "vllm_health" / "node1.json").write_text("[]\n")
    (tmp_path / "vllm_health" / "node2.json").write_text("[]\n")
    result = run(tmp_path, {"vllm": VLLM, "node": NODE, "vllm_health": []})
    assert result["changed"]
    assert sorted(result["written"]) == [str(tmp_path / "node" / "node1.json"), str(tmp_path / "vllm" / "node1.json")]
    assert result["removed"] == [str(tmp_path / "vllm_health" / "node1.json")]
    assert (tmp_path / "vllm" / "node1.json").read_text() == render(VLLM)
    # another host's file is not this run's
    assert (tmp_path / "vllm_health" / "node2.json").exists()
    assert stat.S_IMODE((tmp_path / "vllm" / "node1.json").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "vllm").stat().st_mode) == 0o755


def test_a_second_call_changes_nothing_and_leaves_no_temporary_file(tmp_path):
    jobs = {"vllm": VLLM, "node": NODE, "npu": []}
    run(tmp_path, jobs)
    again = run(tmp_path, jobs)
    assert again == {"changed": False, "written": [], "removed": [], "diff": []}
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["node1.json", "node1.json"]


def test_a_changed_target_or_mode_is_written_again(tmp_path):
    run(tmp_path, {"vllm": VLLM})
    moved = [{"targets": ["10.0.0.2:8001"], "labels": VLLM[0]["labels"]}]
    result = run(tmp_path, {"vllm": moved})
    assert result["written"] == [str(tmp_path / "vllm" / "node1.json")]
    assert result["diff"][0]["before"] == render(VLLM) and result["diff"][0]["after"] == render(moved)
    (tmp_path / "vllm" / "node1.json").chmod(0o600)
    assert run(tmp_path, {"vllm": moved})["written"] == [str(tmp_path / "vllm" / "node1.json")]
    assert stat.S_IMODE((tmp_path / "vllm" / "node1.json").stat().st_mode) == 0o644


def test_check_mode_says_what_would_change_and_changes_nothing(tmp_path):
    (tmp_path / "node").mkdir()
    (tmp_path / "node" / "node1.json").write_text("[]\n")
    result = run(tmp_path, {"vllm": VLLM, "node": []}, check=True)
    assert result["changed"]
    assert result["written"] == [str(tmp_path / "vllm" / "node1.json")]
    assert result["removed"] == [str(tmp_path / "node" / "node1.json")]
    assert not (tmp_path / "vllm").exists()
    assert (tmp_path / "node" / "node1.json").exists()


def test_a_wrong_folder_mode_is_a_change(tmp_path):
    run(tmp_path, {"vllm": VLLM})
    (tmp_path / "vllm").chmod(0o700)
    assert run(tmp_path, {"vllm": VLLM})["changed"]
    assert stat.S_IMODE((tmp_path / "vllm").stat().st_mode) == 0o755


@pytest.mark.parametrize("host, jobs, option", [
    ("../node1", {"vllm": VLLM}, "host"),
    (".node1", {"vllm": VLLM}, "host"),
    ("node1", {"../etc": VLLM}, "jobs"),
    ("node1", {"vllm": {"targets": []}}, "jobs.vllm"),
    ("node1", {"vllm": [{"labels": {}}]}, "jobs.vllm"),
])
def test_refuses_what_cannot_name_a_file_or_is_not_target_groups(tmp_path, host, jobs, option):
    with pytest.raises(FileSdError, match="^" + option.replace(".", r"\.") + ":"):
        publish(str(tmp_path), host, jobs, UID, GID)
    assert list(tmp_path.iterdir()) == []


def test_a_file_where_a_job_folder_belongs_is_refused(tmp_path):
    (tmp_path / "vllm").write_text("")
    with pytest.raises(FileSdError, match="^folder: .* not a folder"):
        run(tmp_path, {"vllm": VLLM})


def test_the_file_is_moved_into_place_from_a_name_prometheus_does_not_read(tmp_path, monkeypatch):
    """Prometheus reads `<job>/[^.]*.json` as files change: the half-written file must not match."""
    moved = []
    real = file_sd.os.replace
    monkeypatch.setattr(file_sd.os, "replace", lambda src, dst: (moved.append((src, dst)), real(src, dst)))
    run(tmp_path, {"vllm": VLLM})
    [(src, dst)] = moved
    assert dst == str(tmp_path / "vllm" / "node1.json") and os.path.dirname(src) == os.path.dirname(dst)
    assert not fnmatch.fnmatchcase(os.path.basename(src), "[!.]*.json")
