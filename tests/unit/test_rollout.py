"""The rollout's batches and capacity guard (module_utils/rollout.py)."""
from __future__ import annotations

import pytest

from ansible.module_utils.rollout import RolloutError, batches, plan, unknown_limit

HOSTS = ["n%d" % i for i in range(1, 11)]


@pytest.mark.parametrize("serial, sizes", [
    ([1, "100%"], [1, 9]),
    ([1], [1] * 10),
    (["30%"], [3, 3, 3, 1]),
    ([1, 2, "50%"], [1, 2, 5, 2]),
    (["5%"], [1] * 10),          # rounds down, at least one
    ([3], [3, 3, 3, 1]),
    (["100%"], [10]),
    ([20], [10]),
])
def test_batches_are_ansibles(serial, sizes):
    result = batches(HOSTS, serial)
    assert [len(b) for b in result] == sizes
    assert sum(result, []) == HOSTS


@pytest.mark.parametrize("serial, says", [
    ([], "empty list"),
    ([0], "at least one host"),
    (["0%"], "above 0"),
    (["150%"], "at most 100"),
    (["half"], "not a number"),
    ([True], "not a number"),
])
def test_bad_batch_sizes_are_refused(serial, says):
    with pytest.raises(RolloutError, match=says):
        plan(HOSTS[:2], serial, {"n1": 1, "n2": 1}, ["n1", "n2"], 1)


def test_a_canary_then_the_rest_keeps_the_others_serving():
    result = plan(["n1", "n2", "n3"], [1, "100%"], {"n1": 1, "n2": 1, "n3": 1}, ["n1", "n2", "n3"], 1)
    assert result["batches"] == [["n1"], ["n2", "n3"]]
    assert result["serving_instances"] == 3


def test_a_batch_of_every_host_breaks_the_guard_and_says_which():
    with pytest.raises(RolloutError) as raised:
        plan(["n1", "n2"], ["100%"], {"n1": 1, "n2": 1}, ["n1", "n2"], 1)
    text = str(raised.value)
    assert text.startswith("vllm_fleet_rollout_serial: batch 1 (n1, n2) takes 2 of the 2 serving")
    assert "leaves 0" in text and "vllm_fleet_min_serving is 1" in text and "serial: [1]" in text


def test_min_serving_counts_instances_not_hosts():
    instances = {"n1": 2, "n2": 2, "n3": 2}
    assert plan(["n1", "n2", "n3"], [1], instances, list(instances), 4)["batches"] == [["n1"], ["n2"], ["n3"]]
    with pytest.raises(RolloutError, match="leaves 4"):
        plan(["n1", "n2", "n3"], [1], instances, list(instances), 5)


def test_hosts_outside_the_limit_serve_during_the_batches():
    # --limit n1: n2 and n3 keep serving while n1 changes
    assert plan(["n1"], ["100%"], {"n1": 1, "n2": 1, "n3": 1}, ["n1", "n2", "n3"], 2)["batches"] == [["n1"]]


def test_a_run_over_part_of_the_fleet_says_what_it_cannot_see():
    instances = {"n%d" % i: 1 for i in range(1, 9)}
    reason = plan(["n1"], ["100%"], instances, list(instances), 2)["reason"]
    assert reason.endswith("; 7 inference host(s) outside this run (n2, n3, n4, n5, n6 and 2 more) are counted as "
                           "serving as they did when it began: a change running on them at the same time "
                           "(another --limit, another slice) is not seen, so keep vllm_fleet_min_serving met by "
                           "each slice alone"), reason
    assert "outside this run" in plan(["n1"], [1], {"n1": 1, "n2": 1}, [], 1)["reason"]
    assert "outside" not in plan(["n1", "n2"], [1], {"n1": 1, "n2": 1}, ["n1", "n2"], 1)["reason"]


def test_hosts_that_do_not_serve_yet_take_nothing_out():
    # n3 is new: the batch with it takes only n2 out of rotation
    result = plan(["n2", "n3"], [2], {"n1": 1, "n2": 1, "n3": 1}, ["n1", "n2"], 1)
    assert result["batches"] == [["n2", "n3"]]


def test_a_bare_fleet_goes_at_once():
    result = plan(["n1", "n2"], [1], {"n1": 1, "n2": 1}, [], 1)
    assert result["serial"] == [2] and result["batches"] == [["n1", "n2"]]
    assert "serves yet" in result["reason"]


def test_one_serving_host_needs_min_serving_zero():
    with pytest.raises(RolloutError, match="lower vllm_fleet_min_serving"):
        plan(["n1"], [1], {"n1": 1}, ["n1"], 1)
    assert plan(["n1"], [1], {"n1": 1}, ["n1"], 0)["batches"] == [["n1"]]


@pytest.mark.parametrize("value", [-1, "1", 1.5, True])
def test_min_serving_is_a_whole_number(value):
    with pytest.raises(RolloutError, match="vllm_fleet_min_serving"):
        plan(["n1"], [1], {"n1": 1}, ["n1"], value)


@pytest.mark.parametrize("limit, unknown", [
    ("", []),
    ("node1", []),
    ("node1,nodeX", ["nodeX"]),
    ("inference:!node2", []),
    ("node*:&inference", []),
    ("~node[0-9]", []),
    ("@retry.txt", []),
    ("all", []),
    ("typo", ["typo"]),
])
def test_a_limit_that_names_what_the_inventory_lacks(limit, unknown):
    assert unknown_limit(limit, ["node1", "node2", "inference", "gateways"]) == unknown


def test_the_module_refuses_a_limit_before_it_plans(run_module):
    result = run_module("rollout_plan", {"hosts": ["n1"], "serial": [1], "instances": {"n1": 1, "n2": 1},
                                         "serving": ["n1", "n2"], "limit": "n1,nX", "known": ["n1", "n2"]})
    assert result["failed"] and result["msg"] == ("--limit n1,nX names nX, which the inventory does not have; "
                                                  "nothing was changed")
    result = run_module("rollout_plan", {"hosts": ["n1", "n2"], "serial": [1, "100%"], "instances": {"n1": 1, "n2": 1},
                                         "serving": ["n1", "n2"]}, check_mode=True)
    assert not result["changed"] and result["batches"] == [["n1"], ["n2"]]
