"""The live-table reader against a listing nft 1.0.6 (Debian 12) printed for the table
the role writes (two engine ports, two IPv4 callers, one IPv6 caller), with the instance
on port 8001 stopping (its port in the set draining)."""
from __future__ import annotations

import copy
import json
from pathlib import Path

from ansible.module_utils.firewall import problems

LISTING = json.loads((Path(__file__).parents[1] / "fixtures" / "nft" / "vllm_fleet.json").read_text())
PORTS, IPV4, IPV6 = [8000, 8001], ["172.17.0.3", "172.17.0.2"], ["fd00::1"]


def test_the_table_as_written_has_no_problem():
    assert problems(LISTING, PORTS, IPV4, IPV6) == []


def test_a_flushed_ruleset_is_reported_as_open():
    assert problems(None, PORTS, IPV4, IPV6) == [
        "table inet vllm_fleet is not loaded: the engine ports are open to every host"]


def test_a_table_without_its_chain_is_open():
    table_only = {"nftables": [item for item in LISTING["nftables"] if "rule" not in item and "chain" not in item]}
    assert problems(table_only, PORTS, IPV4, IPV6) == [
        "table inet vllm_fleet has no input chain: the engine ports are open to every host"]


def test_a_caller_missing_from_the_live_rule_is_named():
    assert problems(LISTING, PORTS, IPV4 + ["172.17.0.9"], IPV6) == [
        "rule 3 is tcp dport 8000,8001 ip saddr 172.17.0.2,172.17.0.3 accept, "
        "expected tcp dport 8000,8001 ip saddr 172.17.0.2,172.17.0.3,172.17.0.9 accept"]


def test_a_port_the_live_table_does_not_close_is_named():
    found = problems(LISTING, PORTS + [8002], IPV4, IPV6)
    assert len(found) == 3 and found[-1] == ("rule 5 is tcp dport 8000,8001 reject tcp reset, "
                                             "expected tcp dport 8000,8001,8002 reject tcp reset")


def test_a_deleted_reject_rule_is_missing():
    edited = copy.deepcopy(LISTING)
    edited["nftables"] = edited["nftables"][:-1]
    assert problems(edited, PORTS, IPV4, IPV6) == ["rule 5 is missing, expected tcp dport 8000,8001 reject tcp reset"]


def test_a_rule_added_by_hand_is_reported():
    edited = copy.deepcopy(LISTING)
    extra = copy.deepcopy(edited["nftables"][-1])
    extra["rule"]["expr"] = [{"counter": {"packets": 0, "bytes": 0}}, {"accept": None}]
    edited["nftables"].append(extra)
    found = problems(edited, PORTS, IPV4, IPV6)
    assert len(found) == 1 and found[0].startswith("rule 6 is unknown") and found[0].endswith("expected none")


def test_a_single_port_and_address_read_as_one_element_sets():
    # nft prints a one-element set as a plain value (the IPv6 rule of the listing)
    assert problems(LISTING, PORTS, IPV4, ["fd00::1"]) == []
    found = problems(LISTING, PORTS, IPV4, [])
    assert found[0].startswith("rule 4 is tcp dport 8000,8001 ip6 saddr fd00::1 accept")


def test_the_draining_ports_are_state_not_a_difference():
    emptied = copy.deepcopy(LISTING)
    for item in emptied["nftables"]:
        if "set" in item:
            assert item["set"]["elem"] == [8001]
            del item["set"]["elem"]
    assert problems(emptied, PORTS, IPV4, IPV6) == []


def test_a_table_without_the_drain_rule_is_named():
    edited = copy.deepcopy(LISTING)
    edited["nftables"] = [item for item in edited["nftables"]
                          if "@draining" not in json.dumps(item.get("rule", {}))]
    assert problems(edited, PORTS, IPV4, IPV6)[0] == (
        "rule 2 is tcp dport 8000,8001 ip saddr 172.17.0.2,172.17.0.3 accept, "
        "expected tcp dport @draining ct state new reject tcp reset")
