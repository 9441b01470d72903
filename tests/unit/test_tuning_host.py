"""library/vllm_tune and its runner (module_utils/tuning_host.py) end to end against a
STAND-IN for vLLM (tests/fixtures/standin_vllm: the server, the parser and `vllm bench
serve` entry points the runner calls, with made-up figures).  The real engine runs the
same search on the H200 (bench/results/h200-tune)."""
from __future__ import annotations

import json
import socket
import stat
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STANDIN = ROOT / "tests" / "fixtures" / "standin_vllm"
SLO = {"ttft_p99_s": 2.0, "tpot_mean_ms": 50.0}
WORKLOAD = {"input_len": 64, "output_len": 16, "target_concurrency": 16}
CANDIDATES = [{"name": "defaults", "settings": None, "why": "vLLM's"},
              {"name": "batched-32768", "settings": {"max-num-batched-tokens": 32768, "max-num-seqs": 64},
               "why": "budget"}]


def standin_python(tmp_path: Path) -> str:
    """A `python` whose vllm is the stand-in."""
    wrapper = tmp_path / "python"
    wrapper.write_text("#!/bin/sh\nPYTHONPATH=%s exec %s \"$@\"\n" % (STANDIN, sys.executable))
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return str(wrapper)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def args(tmp_path, **extra):
    return dict({"python": standin_python(tmp_path), "base": {"model": str(tmp_path), "served-model-name": "m",
                                                              "load-format": "dummy"},
                 "candidates": CANDIDATES, "rates": [1.0, 2.0, 4.0, 8.0], "warmup_s": 10, "slo": SLO,
                 "workload": WORKLOAD,
                 "profile": "cpu-x1/m/vllm-0.32.0", "folder": str(tmp_path / "tune"), "port": free_port(),
                 "api_key": "secret-key-1234", "start_timeout": 30}, **extra)


def test_the_search_runs_each_candidate_and_writes_the_record(run_module, tmp_path):
    result = run_module("vllm_tune", args(tmp_path))
    assert result["changed"] is True, result
    starts = result["starts"]
    # The stand-in prefills 4 requests/s (8 with the 4x budget) first come first served: its
    # p99 TTFT passes 2 s a little below that; each repeat confirms the bracket its screen found.
    assert [(s["candidate"], s["phase"], s["start"], s["capacity"]) for s in starts] == [
        ("defaults", "screen", 1, 3.0), ("batched-32768", "screen", 1, 7.5), ("batched-32768", "repeat", 2, 7.5),
        ("defaults", "repeat", 2, 3.0)]
    assert [p["rate"] for p in starts[0]["points"]] == [1.0, 2.0, 4.0, 3.0, 3.5, 3.25, 3.125]
    assert result["summary"]["verdict"] == "tuned" and result["summary"]["ratio"] == 2.5
    assert result["record_file"] == "cpu-x1--m--vllm-0.32.0.json"
    assert result["record"]["cpu-x1/m/vllm-0.32.0"]["settings"] == {"max-num-batched-tokens": 32768,
                                                                    "max-num-seqs": 64}
    folder = tmp_path / "tune"
    # Each start's --config as vLLM reads it, checked by its parser first; its warm-up and each
    # point's own result, every request's figures in it.
    assert "max-num-batched-tokens: 32768" in (folder / "02-batched-32768.yaml").read_text()
    assert json.loads((folder / "01-defaults-warm-up.json").read_text())["request_rate"] == 1.0
    point = json.loads((folder / "01-defaults-r4.json").read_text())
    assert point["request_rate"] == 4.0 and len(point["start_times"]) == 440
    assert "secret-key-1234" not in json.dumps(result)


def test_a_candidate_vllm_refuses_stops_the_search_naming_it(run_module, tmp_path):
    bad = CANDIDATES + [{"name": "typo", "settings": {"max-num-batched-token": 1}, "why": "a typo"}]
    result = run_module("vllm_tune", args(tmp_path, candidates=bad))
    assert result["failed"] is True
    assert result["msg"] == ("candidate typo: vLLM refuses its settings: ValueError: unrecognized arguments: "
                             "max-num-batched-token")
    assert [s["candidate"] for s in result["starts"]] == ["defaults", "batched-32768"]


def test_check_mode_measures_nothing_and_bad_inputs_are_refused(run_module, tmp_path):
    result = run_module("vllm_tune", args(tmp_path), check_mode=True)
    assert result["changed"] is False and result["starts"] == []
    assert result["msg"] == "would measure defaults, batched-32768 from [1.0, 2.0, 4.0, 8.0] requests/s"
    assert not (tmp_path / "tune").exists()
    result = run_module("vllm_tune", args(tmp_path, slo={"ttft_p99_s": 2}, candidates=CANDIDATES[1:]))
    assert result["failed"] is True
    assert result["msg"] == ("vllm_fleet_slo.tpot_mean_ms: None is not a number of milliseconds; candidates: the plan's "
                             "tuning.candidates, vLLM's defaults first (is vllm_fleet_slo set?)")


def test_a_short_window_is_measured_and_one_too_short_is_refused_before_any_start(run_module, tmp_path):
    """tune_ramp_s / tune_window_s: each point sends rate x (ramp + window) requests and is
    judged after its ramp; a window that cannot hold 20 requests at the lowest rate is refused
    in check mode, which the role runs before the host leaves service."""
    result = run_module("vllm_tune", args(tmp_path, rates=[2.0], ramp_s=5, window_s=20, budget_starts=2))
    assert result["changed"] is True, result
    point = json.loads((tmp_path / "tune" / "01-defaults-r2.json").read_text())
    assert len(point["start_times"]) == 50
    assert [(s["candidate"], [p["rate"] for p in s["points"]]) for s in result["starts"][:2]] == [
        ("defaults", [2.0]), ("batched-32768", [2.0])]
    refused = run_module("vllm_tune", args(tmp_path, rates=[0.5, 2.0], window_s=30), check_mode=True)
    assert refused["failed"] is True
    assert refused["msg"] == ("tune_window_s: 30 s at 0.5 requests/s is 15 requests; a point needs at least 20 in "
                              "its window to judge a p99")


def test_the_engine_user_gets_its_own_user_variables(tmp_path, monkeypatch):
    """A search started by root as the engine user: torch's inductor cache folder is named
    after $USER, so root's would be /tmp/torchinductor_root, which the engine user cannot write
    (vLLM died in warm-up with PermissionError on the demo fleet)."""
    from ansible.module_utils.tuning_host import Runner
    monkeypatch.setenv("USER", "root")
    monkeypatch.setenv("LOGNAME", "root")
    runner = Runner("python3", {"model": "m", "served-model-name": "m"}, {}, str(tmp_path), port=1, user="vllm",
                    api_key="", workload=WORKLOAD, slo=SLO, start_timeout=1)
    assert (runner.env["USER"], runner.env["LOGNAME"], runner.env["HOME"]) == ("vllm", "vllm", str(tmp_path / "cache"))
    mine = Runner("python3", {"model": "m", "served-model-name": "m"}, {}, str(tmp_path), port=1, user=None,
                  api_key="", workload=WORKLOAD, slo=SLO, start_timeout=1)
    assert mine.env["USER"] == "root"
