"""The served endpoint on the converged host, after the side effects (a capacity
rehearsal, refused bad flags, a left-behind instance retired)."""
from __future__ import annotations

import json
import re
import shlex

import pytest

# node1 took the side effects (the rehearsal, the refused flags, the left-behind instance).
testinfra_hosts = ["ansible://node1"]
KEY = "molecule-serve-key"
# The host has no curl: ask with its own Python (standard library only).
REQUEST = r"""
import json, sys, urllib.request, urllib.error
url, key, body = sys.argv[1], sys.argv[2], sys.argv[3]
req = urllib.request.Request(url, data=body.encode() or None,
                             headers={"Content-Type": "application/json",
                                      **({"Authorization": "Bearer " + key} if key else {})})
try:
    with urllib.request.urlopen(req, timeout=60) as r:
        print(r.status); print(r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code); print(e.read().decode())
"""


def engine(host) -> str:
    """The instance's URL as the host reaches it: the address it is bound to (with a
    gateway in the fleet, the host's private address, not 0.0.0.0)."""
    config = host.file("/etc/vllm/main.yaml").content_string
    address = re.search(r'^host: "?([^"\n]+)"?$', config, re.M).group(1)
    return "http://%s:8000" % address


def call(host, path, key="", body=None):
    result = host.run("python3 -c %s %s %s %s" % tuple(
        map(shlex.quote, (REQUEST, engine(host) + path, key, json.dumps(body) if body else ""))))
    assert result.rc == 0, result.stderr
    status, _, text = result.stdout.partition("\n")
    return int(status), text


CHAT = {"model": "tiny-gemma4", "max_tokens": 8,
        "messages": [{"role": "user", "content": "Hello"}]}


def test_unit_is_active_enabled_and_runs_as_vllm(host):
    unit = host.service("vllm@main")
    assert unit.is_running and unit.is_enabled
    pid = host.check_output("systemctl show --property=MainPID --value vllm@main.service")
    assert host.check_output("ps -o user= -p %s" % pid) == "vllm"


def test_the_environment_file_is_private(host):
    env = host.file("/etc/vllm/main.env")
    assert env.mode == 0o600 and env.user == "root"
    assert "HF_HUB_OFFLINE=\"1\"" in env.content_string


def test_the_config_is_the_plan_and_not_the_refused_flag(host):
    config = host.file("/etc/vllm/main.yaml").content_string
    assert "max-model-len: 1024" in config and "port: 8000" in config
    assert "enable-turbo-mode" not in config


def test_models_lists_the_served_name(host):
    status, text = call(host, "/v1/models", KEY)
    assert status == 200
    assert [m["id"] for m in json.loads(text)["data"]] == ["tiny-gemma4"]


@pytest.mark.parametrize("key, status", [(KEY, 200), ("", 401), ("wrong", 401)])
def test_completions_need_the_key(host, key, status):
    got, text = call(host, "/v1/chat/completions", key, CHAT)
    assert got == status, text
    if status == 200:
        body = json.loads(text)
        assert isinstance(body["choices"][0]["message"]["content"], str)
        assert body["usage"]["completion_tokens"] >= 1


def test_metrics_expose_kv_cache_usage(host):
    status, text = call(host, "/metrics")
    assert status == 200 and "vllm:kv_cache_usage_perc" in text


# systemd-analyze's scale: 0 (safest) to 10; <= 2 is "OK". The unit scored 1.5 on the demo;
# a sandboxing line lost (ProtectSystem, a capability, ...) raises it past the limit.
EXPOSURE_LIMIT = 2.0


def test_exposure_is_within_the_limit(host):
    out = host.check_output("systemd-analyze security --no-pager vllm@main.service | tail -1")
    level = re.fullmatch(r".*Overall exposure level for vllm@main\.service: ([0-9.]+) \S+.*", out.strip())
    assert level, out
    assert float(level.group(1)) <= EXPOSURE_LIMIT, out


def test_the_rehearsal_kept_apart_from_the_weights(host):
    """The side effect's capacity rehearsal fetched config and tokenizer only, into
    its own folder; the served snapshot still has its weights."""
    def files(root):
        return host.check_output("find %s -name '*.json' -o -name '*.safetensors'" % root).split()
    rehearsal = files("/var/lib/vllm/models/rehearsal")
    assert any(f.endswith("/config.json") for f in rehearsal)
    assert not any(f.endswith(".safetensors") for f in rehearsal)
    assert any(f.endswith("model.safetensors") for f in files("/var/lib/vllm/models/demo"))
