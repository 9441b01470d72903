"""The gateway's settings: every bad input refused naming the variable, limits falling
back to the gateway's, no key in anything returned."""
from __future__ import annotations

import re
from pathlib import Path

import jinja2
import pytest
from ansible.plugins.filter.core import regex_escape
from ansible.module_utils.gateway import GatewayError, plan, size_bytes, upstreams

DEFAULTS = {"rate_per_second": 10, "burst": 20, "connections": 16, "max_body_size": "1m"}
PATHS = ["/v1/chat/completions", "/v1/completions", "/v1/models"]
UPSTREAMS = [{"host": "node1", "instance": "main", "address": "10.0.0.2", "port": 8000},
             {"host": "node2", "instance": "main", "address": "10.0.0.3", "port": 8000}]
KEY_A, KEY_B = "a" * 24, "b" * 24


def test_limits_fall_back_to_the_gateways_and_no_key_is_returned():
    result = plan([{"name": "alice"}, {"name": "bob", "rate_per_second": 2, "max_body_size": "4m"}],
                  [KEY_A, KEY_B], DEFAULTS, PATHS, {}, UPSTREAMS)
    assert result["clients"] == [dict(DEFAULTS, name="alice"),
                                 dict(DEFAULTS, name="bob", rate_per_second=2, max_body_size="4m")]
    assert KEY_A not in repr(result) and KEY_B not in repr(result)
    assert result["largest_body_bytes"] == 4 << 20
    assert [u["host"] for u in result["upstreams"]] == ["node1", "node2"]


@pytest.mark.parametrize("clients, keys, message", [
    ([], [], "gateway_clients: no client is declared"),
    ([{"name": "alice"}], [""], "gateway_clients[0] (alice): has no key"),
    ([{"name": "alice"}, {"name": "alice"}], [KEY_A, KEY_B],
     "gateway_clients[1] (alice): the name alice is also gateway_clients[0]'s"),
    ([{"name": "alice"}, {"name": "bob"}], [KEY_A, KEY_A],
     "gateway_clients[1] (bob): the key is also gateway_clients[0]'s (or differs from it only in letter case)"),
    # nginx would compare them without case: one key in effect, and one guess apart
    ([{"name": "alice"}, {"name": "bob"}], [KEY_A, KEY_A.upper()],
     "gateway_clients[1] (bob): the key is also gateway_clients[0]'s (or differs from it only in letter case)"),
    ([{"name": "alice"}], ['short"key'], "gateway_clients[0] (alice): the key must be 16-256 characters"),
    ([{"name": "Alice Smith"}], [KEY_A], "gateway_clients[0] (Alice Smith): name 'Alice Smith' must be"),
    ([{"name": "alice", "rate_per_second": 0}], [KEY_A],
     "gateway_clients[0] (alice).rate_per_second: 0 is not a whole number of requests per second > 0"),
    ([{"name": "alice", "connections": -1}], [KEY_A],
     "gateway_clients[0] (alice).connections: -1 is not a whole number of concurrent requests > 0"),
    ([{"name": "alice", "burst": -1}], [KEY_A], "gateway_clients[0] (alice).burst: -1 is not a whole number"),
    ([{"name": "alice", "max_body_size": "1 GB"}], [KEY_A],
     "gateway_clients[0] (alice).max_body_size: '1 GB' is not a size like 1048576, 512k or 1m"),
    ([{"name": "alice", "rate": 5}], [KEY_A], "gateway_clients[0] (alice): unknown setting(s) rate"),
])
def test_bad_clients_are_refused_by_name(clients, keys, message):
    with pytest.raises(GatewayError) as refused:
        plan(clients, keys, DEFAULTS, PATHS, {}, UPSTREAMS)
    assert message in str(refused.value)
    assert KEY_A not in str(refused.value)


@pytest.mark.parametrize("defaults, paths, tls, upstreams, message", [
    (dict(DEFAULTS, rate_per_second=0), PATHS, {}, UPSTREAMS, "gateway_rate_per_second: 0 is not"),
    (dict(DEFAULTS, max_body_size="0"), PATHS, {}, UPSTREAMS, "gateway_max_body_size: '0' is not a size"),
    (DEFAULTS, ["v1/models"], {}, UPSTREAMS, "gateway_allowed_paths[0]: 'v1/models' is not a path"),
    (DEFAULTS, ["/v1/models", "/v1/models"], {}, UPSTREAMS, "gateway_allowed_paths: a path is listed twice"),
    (DEFAULTS, [], {}, UPSTREAMS, "gateway_allowed_paths: empty"),
    (DEFAULTS, ["/v1/{x}"], {}, UPSTREAMS, "gateway_allowed_paths[0]: '/v1/{x}' is not a path"),
    (DEFAULTS, PATHS, {"certificate": "/c.pem"}, UPSTREAMS,
     "gateway_tls_certificate: given without gateway_tls_private_key"),
    (DEFAULTS, PATHS, {"private_key": "/k.pem"}, UPSTREAMS,
     "gateway_tls_private_key: given without gateway_tls_certificate"),
])
def test_bad_gateway_settings_are_refused_by_name(defaults, paths, tls, upstreams, message):
    with pytest.raises(GatewayError) as refused:
        plan([{"name": "alice"}], [KEY_A], defaults, paths, tls, upstreams)
    assert str(refused.value).startswith(message)


def test_upstreams_are_where_each_instance_is_bound():
    bound = [{"name": "main", "port": 8000, "args": {"host": "10.0.0.3", "port": 8000}}]
    wildcard = [{"name": "replica0", "port": 8000, "args": {"host": "0.0.0.0"}},
                {"name": "replica1", "port": 8001, "args": {"host": "0.0.0.0"}}]
    assert upstreams(["node2", "node1", "node3"], ["", "node1.example", ""], [bound, wildcard, []]) == [
        {"host": "node1", "instance": "replica0", "port": 8000, "address": "node1.example",
         "server": "node1.example:8000"},
        {"host": "node1", "instance": "replica1", "port": 8001, "address": "node1.example",
         "server": "node1.example:8001"},
        {"host": "node2", "instance": "main", "port": 8000, "address": "10.0.0.3", "server": "10.0.0.3:8000"}]


def test_an_ipv6_address_is_bracketed_where_nginx_and_prometheus_read_it():
    found = upstreams(["node1"], ["fd00::2"], [[{"name": "main", "port": 8000, "args": {"host": "::"}}]])
    assert [u["server"] for u in found] == ["[fd00::2]:8000"]


@pytest.mark.parametrize("address, bound, message", [
    # an inventory value typed by hand, or one that would add a directive to nginx.conf
    ("10.0.0.2; include /etc/shadow", "0.0.0.0", "ansible_host of node1: '10.0.0.2; include /etc/shadow'"),
    ("node 1", "", "ansible_host of node1: 'node 1'"),
    ("", "10.0.0.2:80", "the host flag of instance main of node1: '10.0.0.2:80'"),
])
def test_an_address_that_is_no_host_name_or_ip_is_refused_by_name(address, bound, message):
    with pytest.raises(GatewayError) as refused:
        upstreams(["node1"], [address], [[{"name": "main", "port": 8000, "args": {"host": bound}}]])
    assert str(refused.value).startswith(message)


def test_sizes_in_nginx_syntax():
    assert [size_bytes(s) for s in ("1048576", "512k", "1m", "2M")] == [1048576, 512 << 10, 1 << 20, 2 << 20]


def test_the_module_hides_the_keys_and_nothing_else(run_module):
    instances = [[{"name": "main", "port": 8000, "args": {"host": "10.0.0.2"}}]]
    result = run_module("gateway_plan", {"clients": [{"name": "alice"}], "keys": [KEY_A], "defaults": DEFAULTS,
                                         "allowed_paths": PATHS, "inference_hosts": ["node1"],
                                         "inference_addresses": [""], "inference_instances": instances})
    assert result["clients"][0]["name"] == "alice" and KEY_A not in repr(result)
    refused = run_module("gateway_plan", {"clients": [{"name": "alice"}, {"name": "bob"}], "keys": [KEY_A, KEY_A],
                                          "defaults": DEFAULTS, "allowed_paths": PATHS})
    assert refused["failed"] and "gateway_clients[1] (bob): the key is also" in refused["msg"]


def test_a_rotating_client_has_two_keys_under_one_name():
    result = plan([{"name": "alice"}, {"name": "bob"}], [{"keys": [KEY_A, "c" * 24]}, {"key": KEY_B}],
                  DEFAULTS, PATHS, {}, UPSTREAMS)
    assert [c["name"] for c in result["clients"]] == ["alice", "bob"]
    assert KEY_A not in repr(result)


@pytest.mark.parametrize("keys, message", [
    ([{"key": KEY_A, "keys": [KEY_A]}], "gateway_clients[0] (alice): has both key and keys"),
    ([{"keys": []}], "gateway_clients[0] (alice): keys is empty"),
    ([{"keys": [KEY_A, 'bad"key']}], "gateway_clients[0] (alice): keys[1]: the key must be 16-256 characters"),
    ([{"keys": [KEY_A, KEY_A]}], "gateway_clients[0] (alice): keys[1]: the key is also gateway_clients[0]'s"),
])
def test_bad_rotations_are_refused_by_name(keys, message):
    with pytest.raises(GatewayError) as refused:
        plan([{"name": "alice"}], keys, DEFAULTS, PATHS, {}, UPSTREAMS)
    assert message in str(refused.value)
    assert KEY_A not in str(refused.value)


def test_another_clients_old_key_is_refused():
    with pytest.raises(GatewayError) as refused:
        plan([{"name": "alice"}, {"name": "bob"}], [{"keys": [KEY_A, KEY_B]}, {"key": KEY_B}],
             DEFAULTS, PATHS, {}, UPSTREAMS)
    assert "gateway_clients[1] (bob): the key is also gateway_clients[0]'s" in str(refused.value)


@pytest.mark.parametrize("engine_key, address, tls_names, message", [
    # '$' would start a variable where nginx.conf sends the key to the engines
    ("fleet$key-0123456789", "", [], "vllm_fleet_api_key: the engines' key must be 16-256 characters"),
    ("short", "", [], "vllm_fleet_api_key: the engines' key must be 16-256 characters"),
    # a name that would add a location to nginx.conf
    ("", "", ["gw.example.com; location /x { return 200; }"], "gateway_tls_names[0]: 'gw.example.com; location"),
    ("", "", ["-gw.example.com"], "gateway_tls_names[0]: '-gw.example.com' is not a DNS name"),
    ("", "gw 1", [], "ansible_host: 'gw 1' is not a DNS name or an IP address"),
])
def test_engine_key_and_names_are_refused_by_name(engine_key, address, tls_names, message):
    with pytest.raises(GatewayError) as refused:
        plan([{"name": "alice"}], [KEY_A], DEFAULTS, PATHS, {"names": tls_names}, UPSTREAMS, engine_key, address)
    assert message in str(refused.value)
    assert engine_key == "" or engine_key not in str(refused.value)


def test_the_certificate_names_keep_their_order_and_leave_out_what_is_no_name():
    result = plan([{"name": "alice"}], [KEY_A], DEFAULTS, PATHS, {"names": ["gw.example.com", "fd00::1"]},
                  UPSTREAMS, "fleet-key-0123456789", "10.0.0.1", ["gw_1", "gw1", "10.0.0.1"])
    # gw_1 (an inventory name with '_') is no DNS name: left out, not refused
    assert result["names"] == ["10.0.0.1", "gw1", "gw.example.com", "fd00::1"]
    assert result["subject_alt_name"] == ["IP:10.0.0.1", "DNS:gw1", "DNS:gw.example.com", "IP:fd00::1"]
    # the fleet CA may sign for these names only (its name constraints)
    assert result["name_constraints"] == ["IP:10.0.0.1/32", "DNS:gw1", "DNS:gw.example.com", "IP:fd00::1/128"]



def test_each_key_matches_itself_alone_in_the_keys_file():
    """keys.conf as the role renders it: each key a case-sensitive expression of the whole
    header (nginx's map would compare a plain string without case), with its '.' and '+'
    escaped, so nothing but the key itself names the client."""
    template = Path(__file__).resolve().parents[2] / "roles" / "gateway" / "templates" / "keys.conf.j2"
    env = jinja2.Environment(trim_blocks=True, undefined=jinja2.StrictUndefined)
    env.filters["regex_escape"] = regex_escape
    key, rotating = "Tester.Key+0123456789", ["new-key/0123456789=", "old-key~0123456789"]
    text = env.from_string(template.read_text()).render(
        ansible_managed="managed", vllm_fleet_api_key="engine-key-0123456789",
        _gateway_plan={"clients": [{"name": "tester"}, {"name": "rotating"}]},
        _gateway_keys=[{"key": key}, {"keys": rotating}])
    sources = dict(re.findall(r'^\s+"~(.+)" "(\w+)";$', text, re.M))
    assert sorted(sources.values()) == ["rotating", "rotating", "tester"]

    def client(header: str) -> list:
        return [name for pattern, name in sources.items() if re.search(pattern, header)]
    assert client("Bearer " + key) == ["tester"]
    for other in ("Bearer " + key.lower(), "Bearer TesterXKey+0123456789", "Bearer Tester.Keyy0123456789",
                  "Bearer " + key + "x", "xBearer " + key):
        assert client(other) == [], other
    assert [client("Bearer " + k) for k in rotating] == [["rotating"], ["rotating"]]


def test_a_run_limited_to_the_gateways_needs_no_plan():
    """The hosts publish their own upstream files: a gateway run without the inference
    hosts' plans (``--limit gateways``) is planned."""
    result = plan([{"name": "alice"}], [KEY_A], DEFAULTS, PATHS, {}, [])
    assert result["upstreams"] == []

