"""promtool's rule tests for the fleet's alert rules: for every alert, synthetic series
that must make it fire (and when), and one healthy fleet on which none fires.  The
series carry the labels the fleet's targets give them (host, vllm_instance, job).

``tests(rules, thresholds)`` returns the test file (a dict) for `promtool test rules`,
the expected annotations rendered from the rules' own templates with each alert's labels
(Prometheus renders {{ $labels.x }} and {{ $value }} the same way).
"""
from __future__ import annotations

import re

TARGET = 'host="node1", vllm_instance="main", instance="10.0.0.2:8000"'
ENGINE = TARGET + ', model_name="tiny-gemma4", engine="0"'
NODE = 'host="node1", role="inference", instance="node1:9100"'
GPU = 'host="node1", gpu="0", UUID="GPU-0", instance="node1:9400", job="dcgm"'
NPU = 'host="node1", id="0", model_name="Ascend910B3", instance="node1:8082", job="npu"'
TLS = {"host": "mirror", "target": "mirror:443", "instance": "127.0.0.1:9115", "job": "gateway_tls"}
TLS_SERIES = ", ".join('%s="%s"' % item for item in TLS.items())
NPU_LABELS = {"host": "node1", "id": "0", "model_name": "Ascend910B3", "instance": "node1:8082", "job": "npu"}


def series(thresholds: dict) -> dict:
    """alert -> (its input series [(selector, values)], the time after its rule's ``for``
    at which it must fire, the labels it fires with, $value).  Series run 60 minutes."""
    high = thresholds["kv_cache_usage"] + 0.05
    waiting = thresholds["requests_waiting"] + 4
    hot = thresholds["gpu_temperature_celsius"] + 5
    # promtool's clock starts at 0: an expiry this many seconds from then
    expiring = (thresholds["certificate_days"] - 1) * 86400
    engine = {"host": "node1", "vllm_instance": "main", "instance": "10.0.0.2:8000"}
    return {
        "VllmInstanceDown": ([('up{job="vllm", %s}' % TARGET, "1 0x60")], "2m", dict(engine, job="vllm"), None),
        "VllmEngineUnhealthy": ([('probe_success{job="vllm_health", host="node1", vllm_instance="main", '
                                  'instance="http://10.0.0.2:8000/health"}', "1 0x60")], "2m",
                                {"host": "node1", "vllm_instance": "main", "job": "vllm_health",
                                 "instance": "http://10.0.0.2:8000/health"}, None),
        "VllmKvCacheNearlyFull": ([('vllm:kv_cache_usage_perc{job="vllm", %s}' % ENGINE, "%sx60" % high)], "2m",
                                  dict(engine, job="vllm", model_name="tiny-gemma4", engine="0"), None),
        "VllmRequestsWaiting": ([('vllm:num_requests_waiting{job="vllm", %s}' % ENGINE, "%dx60" % waiting)], "2m",
                                dict(engine, job="vllm", model_name="tiny-gemma4", engine="0"), None),
        "VllmPreemptionsRising": ([('vllm:num_preemptions_total{job="vllm", %s}' % ENGINE, "0+5x60")], "8m",
                                  dict(engine, job="vllm", model_name="tiny-gemma4", engine="0"), None),
        # 2 of 100 requests a minute above 5 s, the rest under 1 s: p99 about 5 s
        "VllmTimeToFirstTokenAboveSlo": ([
            ('vllm:time_to_first_token_seconds_bucket{job="vllm", %s, le="1.0"}' % ENGINE, "0+98x60"),
            ('vllm:time_to_first_token_seconds_bucket{job="vllm", %s, le="5.0"}' % ENGINE, "0+98x60"),
            ('vllm:time_to_first_token_seconds_bucket{job="vllm", %s, le="10.0"}' % ENGINE, "0+100x60"),
            ('vllm:time_to_first_token_seconds_bucket{job="vllm", %s, le="+Inf"}' % ENGINE, "0+100x60")],
            "8m", {"host": "node1", "vllm_instance": "main"}, None),
        "VllmRequestsFailing": ([
            ('vllm:request_success_total{job="vllm", %s, finished_reason="stop"}' % ENGINE, "0+80x60"),
            ('vllm:request_success_total{job="vllm", %s, finished_reason="abort"}' % ENGINE, "0+20x60"),
            ('vllm:request_success_total{job="vllm", %s, finished_reason="error"}' % ENGINE, "0+0x60")],
            "8m", {"host": "node1", "vllm_instance": "main"}, None),
        "VllmAdmissionRejections": ([('vllm:admission_rejections_total{job="vllm", %s, reason="max_num_queued_reqs"}'
                                      % ENGINE, "0+3x60")], "8m",
                                    {"host": "node1", "vllm_instance": "main", "reason": "max_num_queued_reqs"}, None),
        "HostExporterDown": ([('up{job="node", %s}' % NODE, "1 0x60")], "2m", {
            "host": "node1", "role": "inference", "instance": "node1:9100", "job": "node"}, None),
        "GatewayDown": ([('up{job="nginx", host="mirror", instance="mirror:9113"}', "1x60"),
                         ('nginx_up{job="nginx", host="mirror", instance="mirror:9113"}', "1 0x60")], "2m",
                        {"host": "mirror", "instance": "mirror:9113", "job": "nginx"}, None),
        "GatewayTlsHandshakeFailing": ([('probe_success{%s}' % TLS_SERIES, "1 0x60")], "2m", TLS, None),
        "GatewayCertificateExpiresSoon": ([('probe_ssl_earliest_cert_expiry{%s}' % TLS_SERIES, "%dx60" % expiring)],
                                          "1m", TLS, None),
        "MirrorCannotServeTheRevision": ([('probe_success{job="mirror", mirror="http://mirror:8090", '
                                           'repo="demo/tiny-gemma4", instance="http://mirror:8090/api"}', "1 0x60")],
                                         "2m", {"job": "mirror", "mirror": "http://mirror:8090",
                                                "repo": "demo/tiny-gemma4", "instance": "http://mirror:8090/api"},
                                         None),
        "ModelDiskFilling": ([
            ('node_filesystem_avail_bytes{job="node", %s, mountpoint="/", fstype="ext4", device="/dev/sda1"}'
             % NODE, "%dx60" % int(1000 * thresholds["disk_free_ratio"] / 2)),
            ('node_filesystem_size_bytes{job="node", %s, mountpoint="/", fstype="ext4", device="/dev/sda1"}'
             % NODE, "1000x60")], "2m",
            {"host": "node1", "role": "inference", "instance": "node1:9100", "job": "node", "mountpoint": "/",
             "fstype": "ext4", "device": "/dev/sda1"}, None),
        "GpuXidError": ([('DCGM_FI_DEV_XID_ERRORS{%s}' % GPU, "0 0 79x60")], "3m",
                        {"host": "node1", "gpu": "0", "UUID": "GPU-0", "instance": "node1:9400", "job": "dcgm"}, "79"),
        "GpuTemperatureHigh": ([('DCGM_FI_DEV_GPU_TEMP{%s}' % GPU, "%dx60" % hot)], "2m",
                               {"host": "node1", "gpu": "0", "UUID": "GPU-0", "instance": "node1:9400",
                                "job": "dcgm"}, None),
        "NpuUnhealthy": ([('npu_chip_info_health_status{%s}' % NPU, "1 1 0x60")], "2m", NPU_LABELS, None),
        "NpuTemperatureHigh": ([('npu_chip_info_temperature{%s}' % NPU, "%dx60" % hot)], "2m", NPU_LABELS, None),
        "NpuMemoryNearlyFull": ([('npu_chip_info_hbm_used_memory{%s}' % NPU, "65000x60"),
                                 ('npu_chip_info_hbm_total_memory{%s}' % NPU, "65536x60")], "2m", NPU_LABELS, None),
        "GpuMemoryNearlyFull": ([('DCGM_FI_DEV_FB_USED{%s}' % GPU, "143000x60"),
                                 ('DCGM_FI_DEV_FB_FREE{%s}' % GPU, "700x60")], "2m",
                                {"host": "node1", "gpu": "0", "UUID": "GPU-0", "instance": "node1:9400",
                                 "job": "dcgm"}, None),
    }


def healthy() -> list:
    """One healthy fleet's series: no alert fires."""
    return [
        {"series": 'up{job="vllm", %s}' % TARGET, "values": "1x60"},
        {"series": 'probe_success{job="vllm_health", host="node1", vllm_instance="main"}', "values": "1x60"},
        {"series": 'vllm:kv_cache_usage_perc{job="vllm", %s}' % ENGINE, "values": "0.3x60"},
        {"series": 'vllm:num_requests_waiting{job="vllm", %s}' % ENGINE, "values": "0x60"},
        {"series": 'vllm:num_preemptions_total{job="vllm", %s}' % ENGINE, "values": "0x60"},
        {"series": 'vllm:time_to_first_token_seconds_bucket{job="vllm", %s, le="1.0"}' % ENGINE, "values": "0+100x60"},
        {"series": 'vllm:time_to_first_token_seconds_bucket{job="vllm", %s, le="+Inf"}' % ENGINE,
         "values": "0+100x60"},
        {"series": 'vllm:request_success_total{job="vllm", %s, finished_reason="stop"}' % ENGINE, "values": "0+99x60"},
        {"series": 'vllm:request_success_total{job="vllm", %s, finished_reason="abort"}' % ENGINE, "values": "0+1x60"},
        {"series": 'vllm:admission_rejections_total{job="vllm", %s, reason="max_num_queued_reqs"}' % ENGINE,
         "values": "0x60"},
        {"series": 'up{job="node", %s}' % NODE, "values": "1x60"},
        {"series": 'up{job="nginx", host="mirror"}', "values": "1x60"},
        {"series": 'nginx_up{job="nginx", host="mirror"}', "values": "1x60"},
        {"series": 'probe_success{job="mirror", mirror="http://mirror:8090"}', "values": "1x60"},
        {"series": 'probe_success{%s}' % TLS_SERIES, "values": "1x60"},
        {"series": 'probe_ssl_earliest_cert_expiry{%s}' % TLS_SERIES, "values": "%dx60" % (825 * 86400)},
        {"series": 'node_filesystem_avail_bytes{job="node", %s, mountpoint="/"}' % NODE, "values": "600x60"},
        {"series": 'node_filesystem_size_bytes{job="node", %s, mountpoint="/"}' % NODE, "values": "1000x60"},
        {"series": 'DCGM_FI_DEV_XID_ERRORS{%s}' % GPU, "values": "0x60"},
        {"series": 'DCGM_FI_DEV_GPU_TEMP{%s}' % GPU, "values": "60x60"},
        {"series": 'DCGM_FI_DEV_FB_USED{%s}' % GPU, "values": "130000x60"},
        {"series": 'DCGM_FI_DEV_FB_FREE{%s}' % GPU, "values": "13000x60"},
        {"series": 'npu_chip_info_health_status{%s}' % NPU, "values": "1x60"},
        {"series": 'npu_chip_info_temperature{%s}' % NPU, "values": "55x60"},
        {"series": 'npu_chip_info_hbm_used_memory{%s}' % NPU, "values": "40000x60"},
        {"series": 'npu_chip_info_hbm_total_memory{%s}' % NPU, "values": "65536x60"},
    ]


def minutes(duration: str) -> float:
    """A Prometheus duration (as the rules use them: s, m, h) in minutes."""
    scale = {"s": 1 / 60, "m": 1, "h": 60}
    return sum(int(n) * scale[unit] for n, unit in re.findall(r"([0-9]+)([smh])", duration))


def render(template: str, labels: dict, value: str | None) -> str:
    """A rule's annotation as Prometheus renders it: {{ $labels.x }} and {{ $value }}."""
    text = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels.get(m.group(1), ""), template)
    return text.replace("{{ $value }}", value or "")


def tests(rules: dict, thresholds: dict, rule_file: str) -> dict:
    """The `promtool test rules` file for ``rules`` (the parsed rules file at ``rule_file``)."""
    by_name = {rule["alert"]: rule for group in rules["groups"] for rule in group["rules"]}
    cases = series(thresholds)
    missing = sorted(set(by_name) - set(cases))
    if missing:
        raise AssertionError("alerts without a rule test: %s" % ", ".join(missing))
    out = []
    for name, (inputs, after, labels, value) in cases.items():
        rule = by_name[name]
        at = "%ds" % round((minutes(rule.get("for", "0m")) + minutes(after)) * 60)
        out.append({
            "interval": "1m",
            "input_series": [{"series": s, "values": v} for s, v in inputs],
            "alert_rule_test": [{"eval_time": at, "alertname": name, "exp_alerts": [{
                "exp_labels": dict(labels, **rule.get("labels", {})),
                "exp_annotations": {k: render(v, labels, value) for k, v in rule["annotations"].items()},
            }]}],
        })
    out.append({"interval": "1m", "input_series": healthy(),
                "alert_rule_test": [{"eval_time": "50m", "alertname": name, "exp_alerts": []} for name in by_name]})
    return {"rule_files": [rule_file], "evaluation_interval": "1m", "tests": out}
