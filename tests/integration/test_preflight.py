"""playbooks/preflight.yml on the example inventories: the hardware profiles are
planned, the invalid settings refused with the variable named, nothing changed."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]

REFUSALS = {
    "tp-does-not-divide-heads": "preflight_tensor_parallel_size=3 does not divide the model's 32 attention heads",
    "bf16-on-a-4090": "preflight_tensor_parallel_size=auto: the model does not fit on 1 GPU(s) of 24.0 GiB",
    "seed-swap-space": "preflight_vllm_args['swap-space']: --swap-space was removed from vLLM",
    "seed-prometheus-port": "preflight_vllm_args['prometheus-port']: --prometheus-port does not exist",
    "seed-quantization-fp8-on-fp8-block": "preflight_quantization: --quantization fp8 contradicts",
    "seed-fictitious-env": "preflight_vllm_env['VLLM_USE_RoPE_KERNEL']: VLLM_USE_RoPE_KERNEL is not a vLLM variable",
    "env-name-typed-as-an-assignment": "preflight_vllm_env['HF_HOME=/data/hf']: 'HF_HOME=/data/hf' is not an "
                                       "environment variable name",
    # The fleet-wide settings, on an inference host and on one that is not.
    "engine-typed-wrong": "value of vllm_fleet_engine must be one of: cuda, cpu, ascend, got: cdua",
    "mirror-engine-typed-wrong": "value of vllm_fleet_engine must be one of: cuda, cpu, ascend, got: gpu",
    # Paths the roles write into units and command lines.
    "runtime-root-with-a-space": "vllm_runtime_root: '/opt/vllm fleet' is not an absolute path of letters, digits "
                                 "and '._+-'",
    "cann-root-that-ends-the-shell-string": "ascend_cann_root: \"/usr/local/Ascend'; reboot; '\" is not an absolute "
                                            "path",
    "mirror-root-with-a-specifier": "hf_mirror_root: '/var/lib/olah-%H' is not an absolute path",
    "mirror-admits-a-name": "hf_mirror_allow: control.example.com is not an IPv4 or IPv6 address or prefix",
    "mirror-listens-on-two-lines": "hf_mirror_listen: 0.0.0.0:8090\nExecStartPre=/bin/true is not an IPv4 or IPv6 "
                                   "address",
    "mirror-backend-on-the-mirrors-port": "hf_mirror_port and hf_mirror_backend_port: both 8090; olah listens on "
                                          "its own port behind the mirror's socket",
    # The instances of a host, checked against the plan and the host before anything runs.
    "instances-share-a-gpu": "preflight_instances[1] (second): device 0 is also first's; two instances cannot "
                             "share a GPU",
    "instance-device-beyond-the-host": "preflight_instances[0] (main): device 7 does not exist; the host has 4 "
                                       "GPU(s), 0-3",
    "instance-devices-not-tensor-parallel": "preflight_instances[0] (wide): 2 device(s) [0, 1], but "
                                            "tensor_parallel_size is 1: an instance takes exactly "
                                            "tensor_parallel_size GPUs",
    "instances-duplicate-names-and-ports": "preflight_instances: name chat is given to instances[0] and "
                                           "instances[1]; each instance needs its own name; preflight_instances: port "
                                           "9000 is given to instances[0] and instances[1]; each instance "
                                           "needs its own port",
    "no-model-to-plan": "vllm_fleet_model_repo: empty, and preflight_model names no catalogue entry",
    "engine-release-unknown": "vllm_fleet_engine_version: '0.1.0' is not a release of the cuda engine",
    "engine-key-that-reads-as-a-flag": "vllm_fleet_api_key_also_accepted: needs vllm_fleet_api_key, and each key, "
                                       "that one included, must be 16-256 characters of letters, digits and "
                                       "._~+/=- not starting with '-'",
    "engine-key-rotating-on-a-release-that-logs-it": "vllm_fleet_api_key_also_accepted: the cuda engine's release "
                                                      "0.25.1 (vLLM 0.25.1) prints --api-key in clear in its start-up "
                                                      "log",
    "context-beyond-the-model": "preflight_max_model_len=300000 exceeds the model's max_position_embeddings",
    "utilization-as-percent": "preflight_gpu_memory_utilization=92.0 is out of range",
    "kv-dtype-unknown": "value of preflight_kv_cache_dtype must be one of: auto, bfloat16, float16, fp8",
}


def report(run, host: str) -> dict:
    return run.fact(host, "preflight_report")


@pytest.mark.parametrize("check", [False, True], ids=["run", "check-mode"])
def test_every_profile_is_planned(playbook, check):
    run = playbook("preflight.yml", ROOT / "inventories" / "example", check=check)
    assert run.rc == 0, run.stderr
    assert run.changed() == 0
    hosts = ["h200-fp8", "h100-fp8", "l40s-fp8-tp2", "a100-bf16-tp2", "rtx4090-awq", "ascend-910b", "cpu-demo"]
    table = next(r["msg"] for _n, r in run.host_results("h200-fp8") if str(r.get("msg", "")).startswith("host "))
    assert {line.split()[0] for line in table.splitlines()[1:8]} == set(hosts)
    plans = {host: report(run, host)["plan"] for host in hosts}
    assert {h: (p["quantization"].get("mode", p["engine"]), p["tensor_parallel_size"]) for h, p in plans.items()} == {
        "h200-fp8": ("fp8_native", 1), "h100-fp8": ("fp8_native", 1), "l40s-fp8-tp2": ("fp8_native", 2),
        "a100-bf16-tp2": ("bfloat16", 2), "rtx4090-awq": ("int4_weight_only", 1),
        "ascend-910b": ("bfloat16", 4), "cpu-demo": ("bfloat16", 1)}
    assert plans["cpu-demo"]["kv_cache_tokens"] == 1016800
    assert plans["h200-fp8"]["vllm_args"] == {"tensor-parallel-size": 1, "max-model-len": 32768,
                                              "gpu-memory-utilization": 0.92}
    assert plans["rtx4090-awq"]["vllm_args"]["kv-cache-dtype"] == "fp8"
    assert all(report(run, h)["source"] == "declared" for h in hosts)


def test_invalid_settings_are_refused_by_name(playbook):
    run = playbook("preflight.yml", ROOT / "inventories" / "example-invalid")
    assert run.rc != 0
    assert run.changed() == 0
    for host, message in REFUSALS.items():
        _task, text = run.failure(host)
        assert message in text, (host, text)


def test_plan_is_published_for_later_roles(playbook, localhost_inventory):
    run = playbook("preflight.yml", localhost_inventory,
                   {"vllm_fleet_engine": "cpu", "preflight_model": "tiny-gemma4",
                    "preflight_max_model_len": 1024})
    assert run.rc == 0, run.stderr
    plan = run.fact("localhost", "preflight_plan")
    assert plan["kv_cache_tokens"] == 1016800 and plan["vllm_args"]["max-model-len"] == 1024


GATEWAY_REFUSALS = {
    "gw-client-without-key": ([{"name": "alice"}],
                              "gateway_clients[0] (alice): has no key"),
    "gw-duplicate-name": ([{"name": "alice", "key": "k" * 20}, {"name": "alice", "key": "j" * 20}],
                          "gateway_clients[1] (alice): the name alice is also gateway_clients[0]'s"),
    "gw-duplicate-key": ([{"name": "alice", "key": "k" * 20}, {"name": "bob", "key": "k" * 20}],
                         "gateway_clients[1] (bob): the key is also gateway_clients[0]'s (or differs from it only in "
                         "letter case); every client needs its own"),
    "gw-rate-zero": ([{"name": "alice", "key": "k" * 20, "rate_per_second": 0}],
                     "gateway_clients[0] (alice).rate_per_second: 0 is not a whole number of requests per second > 0"),
    "gw-connections-negative": ([{"name": "alice", "key": "k" * 20, "connections": -4}],
                                "gateway_clients[0] (alice).connections: -4 is not a whole number of concurrent "
                                "requests > 0"),
}


def test_bad_gateway_settings_are_refused_before_any_host_changes(playbook, tmp_path):
    """playbooks/preflight.yml checks the gateways against the inference hosts' plans."""
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    gateways = {name: dict(local, gateway_clients=clients) for name, (clients, _m) in GATEWAY_REFUSALS.items()}
    gateways["gw-cert-without-key"] = dict(local, gateway_clients=[{"name": "alice", "key": "k" * 20}],
                                           gateway_tls_certificate="/etc/ssl/certs/server.pem")
    gateways["gw-path-not-a-path"] = dict(local, gateway_clients=[{"name": "alice", "key": "k" * 20}],
                                          gateway_allowed_paths=["/v1/models", "v1/chat/completions"])
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {
        "inference": {"hosts": {"cpu-node": dict(local, preflight_hardware={"gpus": []})}},
        "gateways": {"hosts": gateways}}}}))
    run = playbook("preflight.yml", inventory, {"vllm_fleet_engine": "cpu", "preflight_model": "tiny-gemma4",
                                                "preflight_max_model_len": 1024})
    assert run.rc != 0 and run.changed() == 0
    assert run.fact("cpu-node", "preflight_plan")["instances"][0]["name"] == "main"
    expected = {name: message for name, (_c, message) in GATEWAY_REFUSALS.items()}
    expected["gw-cert-without-key"] = ("gateway_tls_certificate: given without gateway_tls_private_key; give both, "
                                       "or neither for a fleet CA")
    expected["gw-path-not-a-path"] = ("gateway_allowed_paths[1]: 'v1/chat/completions' is not a path")
    for host, message in expected.items():
        _task, text = run.failure(host)
        assert message in text, (host, text)
        assert "k" * 20 not in text


MONITORING_REFUSALS = {
    "mon-kv-above-1": ({"monitoring_alert_kv_cache_usage": 1.5},
                       "monitoring_alert_kv_cache_usage: 1.5 is not a ratio of the KV cache"),
    "mon-negative-slo": ({"monitoring_alert_ttft_p99_seconds": -1.0},
                         "monitoring_alert_ttft_p99_seconds: -1.0 is not seconds"),
    "mon-retention": ({"monitoring_retention_time": "two weeks"},
                      "monitoring_retention_time: 'two weeks' is not a Prometheus duration"),
    "mon-window": ({"monitoring_alert_down_for": "2"}, "monitoring_alert_down_for: '2' is not a Prometheus duration"),
    "mon-webhook": ({"monitoring_alertmanager_webhook_url": "pager:8080"},
                    "monitoring_alertmanager_webhook_url: the value (not shown: a webhook URL often carries a "
                    "token) is not an http:// or https:// URL"),
}


def test_bad_monitoring_settings_are_refused_before_any_host_changes(playbook, tmp_path):
    """playbooks/preflight.yml checks each monitoring host's settings, naming the variable."""
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {
        "inference": {"hosts": {"cpu-node": dict(local, preflight_hardware={"gpus": []})}},
        "monitoring": {"hosts": {name: dict(local, **settings)
                                 for name, (settings, _m) in MONITORING_REFUSALS.items()}}}}}))
    run = playbook("preflight.yml", inventory, {"vllm_fleet_engine": "cpu", "preflight_model": "tiny-gemma4",
                                                "preflight_max_model_len": 1024})
    assert run.rc != 0 and run.changed() == 0
    for host, (_settings, message) in MONITORING_REFUSALS.items():
        _task, text = run.failure(host)
        assert message in text, (host, text)


SLO_REFUSALS = {
    "slo-seconds-as-ms": ({"vllm_fleet_slo": {"ttft_p99_s": 2000, "tpot_mean_ms": 50}},
                          "vllm_fleet_slo.ttft_p99_s: 2000 seconds is out of range: 0.01 <= value <= 600.0 "
                          "(it is in seconds: 2000 ms is 2)"),
    "slo-unknown-key": ({"vllm_fleet_slo": {"ttft_p99_s": 2, "tpot_p99_ms": 50}},
                        "vllm_fleet_slo.tpot_p99_ms: not an objective this project measures"),
    "workload-zero": ({"vllm_fleet_slo": {"ttft_p99_s": 2, "tpot_mean_ms": 50},
                       "vllm_fleet_workload": {"input_len": 0, "output_len": 256, "target_concurrency": 32}},
                      "vllm_fleet_workload.input_len: 0 is not a whole number from 1 to 10000000"),
    "fleet-rate-negative": ({"vllm_fleet_slo": {"ttft_p99_s": 2, "tpot_mean_ms": 50}, "vllm_fleet_request_rate": -5},
                            "vllm_fleet_request_rate: -5.0 is not a number of requests per second, 0 or more"),
}


def test_an_slo_is_checked_and_the_h200_record_is_read(playbook, tmp_path):
    """The SLO and workload are refused by name before any host changes; a declared H200 on
    vLLM 0.25.1 gets the shipped record (a tie: the plan stays computed, and says so)."""
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    h200 = dict(local, vllm_fleet_engine="cuda", vllm_fleet_engine_version="0.25.1",
                preflight_model="gemma-4-31B-it-FP8-block", preflight_max_model_len=32768,
                vllm_fleet_slo={"ttft_p99_s": 2, "tpot_mean_ms": 50}, vllm_fleet_request_rate=100,
                preflight_hardware={"gpus": [{"name": "NVIDIA H200", "memory_total_bytes": 150754820096,
                                              "compute_capability": "9.0"}]})
    cpu = dict(local, preflight_hardware={"gpus": []}, vllm_fleet_engine="cpu", preflight_model="tiny-gemma4",
               preflight_max_model_len=1024)
    hosts = {name: dict(cpu, **settings) for name, (settings, _m) in SLO_REFUSALS.items()}
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"inference": {"hosts": dict(hosts, h200=h200)}}}}))
    run = playbook("preflight.yml", inventory)
    assert run.rc != 0 and run.changed() == 0
    for host, (_settings, message) in SLO_REFUSALS.items():
        _task, text = run.failure(host)
        assert message in text, (host, text)
    tuning = report(run, "h200")["plan"]["tuning"]
    assert tuning["state"] == "computed" and tuning["profile"] == "nvidia-h200-x1/gemma-4-31B-it-FP8-block/vllm-0.25.1"
    assert tuning["why"].startswith("the record for nvidia-h200-x1/gemma-4-31B-it-FP8-block/vllm-0.25.1 was measured "
                                    "by another method (closed-loop")
    assert [c["name"] for c in tuning["candidates"]] == ["defaults", "computed", "batched-16384", "batched-32768"]
    # The capacity it states, the hosts the fleet's rate needs, and the warning that one is too few.
    capacity = report(run, "h200")["plan"]["capacity"]
    assert capacity["fleet"] == {"request_rate": 100.0, "hosts_needed": 18}
    table = next(r["msg"] for host in [*SLO_REFUSALS, "h200"] for _n, r in run.host_results(host)
                 if str(r.get("msg", "")).startswith("host "))
    assert ("h200: expected capacity %s requests/s at the SLO (1 x %s, bound by tpot"
            % (capacity["per_host_requests_per_s"], capacity["per_instance"]["requests_per_s"])) in table
    assert "h200: the fleet's 100.0 requests/s need 18 hosts like this one" in table
    assert ("fleet: %.2f requests/s expected at the SLO from the planned hosts; vllm_fleet_request_rate is 100.0: "
            "warning: fewer hosts than the rate needs" % capacity["per_host_requests_per_s"]) in table


def test_a_serving_group_is_planned_across_its_hosts(playbook, tmp_path):
    """Two declared hosts of one 48 GiB card each: Gemma-4-31B in BF16 spans both (pipeline
    parallel), the head serves the API, the worker runs headless; a group without its
    interconnect is refused by name."""
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
             "preflight_model": "gemma-4-31B-it", "preflight_max_model_len": 8192,
             "preflight_hardware": {"gpus": [{"name": "NVIDIA L40S", "memory_total_bytes": 51539607552,
                                              "compute_capability": "8.9"}]}}
    pair = dict(local, preflight_serving_group=["l40s-a", "l40s-b"], preflight_interconnect="roce")
    loose = dict(local, preflight_serving_group=["l40s-c", "l40s-d"])
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"inference": {"hosts": {
        "l40s-a": dict(pair, ansible_host="10.0.0.1"), "l40s-b": pair, "l40s-c": loose, "l40s-d": loose,
        "l40s-e": dict(local, preflight_serving_group=["l40s-a", "l40s-b"])}}}}}))
    run = playbook("preflight.yml", inventory)
    assert run.rc != 0 and run.changed() == 0
    head, worker = report(run, "l40s-a")["plan"], report(run, "l40s-b")["plan"]
    assert (head["pipeline_parallel_size"], head["tensor_parallel_size"]) == (2, 1)
    assert head["multinode"]["role"] == "head" and worker["multinode"]["role"] == "worker"
    assert worker["instances"][0]["args"]["master-addr"] == "10.0.0.1"
    _task, text = run.failure("l40s-c")
    assert "preflight_interconnect: ''; the plan spans 2 hosts (pipeline parallel)" in text
    _task, text = run.failure("l40s-e")
    assert 'preflight_serving_group: ["l40s-a", "l40s-b"] does not name l40s-e' in text


@pytest.mark.parametrize("extra, message", [
    ({"tune_host": "elsewhere"}, 'tune_host: "elsewhere" is not an inference host of the inventory'),
    ({"tune_host": "cpu-node", "vllm_fleet_slo": {}}, "vllm_fleet_slo: empty, so the plan has no candidates"),
    ({"tune_host": "cpu-node", "tune_rates": [0, 4]}, "tune_rates: [0, 4] is not a list of request rates > 0"),
    ({"tune_host": "cpu-node", "tune_take_host_out": True},
     "vllm_fleet_min_serving: taking cpu-node out for the search leaves 0 planned instance(s)"),
], ids=["unknown-host", "no-slo", "bad-rates", "last-host"])
def test_tune_refuses_before_it_stops_anything(playbook, tmp_path, extra, message):
    """playbooks/tune.yml checks its inputs and the capacity guard before any host changes."""
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
             "preflight_hardware": {"gpus": []}}
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"inference": {"hosts": {"cpu-node": local}}}}}))
    run = playbook("tune.yml", inventory, dict({"vllm_fleet_engine": "cpu", "preflight_model": "tiny-gemma4",
                                                "preflight_max_model_len": 1024,
                                                "vllm_fleet_slo": {"ttft_p99_s": 2, "tpot_mean_ms": 50}}, **extra))
    assert run.rc != 0 and run.changed() == 0
    _task, text = run.failure("cpu-node")
    assert message in text, text


def test_the_accelerator_exporters_inputs_are_checked_before_any_host_changes(playbook, tmp_path):
    """In a monitored fleet: an ascend host without the npu-exporter's URL and sha256, and a
    cuda host whose DCGM fields leave out one the rules read, are refused by name."""
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    ascend = dict(local, vllm_fleet_engine="ascend", preflight_model="tiny-gemma4", preflight_max_model_len=1024,
                  preflight_hardware={"gpus": [{"name": "Ascend910B3", "memory_total_bytes": 68719476736,
                                                "count": 1}]})
    cuda = dict(local, preflight_model="gemma-4-31B-it-FP8-block",
                accelerator_exporter_dcgm_counters=[["DCGM_FI_DEV_GPU_TEMP", "gauge", "t"]],
                preflight_hardware={"gpus": [{"name": "NVIDIA H200", "memory_total_bytes": 150754820096,
                                              "compute_capability": "9.0"}]})
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {
        "inference": {"hosts": {"npu-host": ascend, "gpu-host": cuda}},
        "monitoring": {"hosts": {"watcher": local}}}}}))
    run = playbook("preflight.yml", inventory)
    assert run.rc != 0 and run.changed() == 0
    _task, text = run.failure("npu-host")
    assert "accelerator_exporter_npu_url / accelerator_exporter_npu_sha256: the npu-exporter binary" in text, text
    _task, text = run.failure("gpu-host")
    assert "accelerator_exporter_dcgm_counters: each entry is [DCGM_FI_name" in text, text
    assert 'got ["DCGM_FI_DEV_GPU_TEMP"]' in text


def test_the_service_tag_alone_says_which_tags_it_needs_before_changing_anything(playbook, localhost_inventory):
    """README, "Running one stage": the service stage starts what runtime and model publish."""
    run = playbook("site.yml", localhost_inventory,
                   {"vllm_fleet_engine": "cpu", "preflight_model": "tiny-gemma4", "preflight_max_model_len": 1024,
                    "vllm_fleet_api_key": "k" * 32}, tags="service")
    assert run.rc != 0 and run.changed() == 0
    task, text = run.failure("localhost")
    assert task == "Check that the earlier stages ran", text
    assert "run site.yml with --tags runtime,model,service rather than --tags service alone" in text
