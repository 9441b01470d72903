"""The planner's nodes dimension: pipeline parallel across the hosts of a serving group,
tensor parallel inside each, chosen only when no single host fits (module_utils/vllm_planner.py)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from ansible.module_utils import rollout
from ansible.module_utils.gateway import upstreams
from ansible.module_utils.vllm_planner import PlanError, plan, pp_partition, stage_shape, model_shape

ROOT = Path(__file__).resolve().parents[2]
BF16 = json.loads((ROOT / "roles/preflight/files/models/gemma-4-31B-it.json").read_text())
L40S = [{"name": "NVIDIA L40S", "memory_total_bytes": 48 * 1024 ** 3, "compute_capability": "8.9"}]
H200 = [{"name": "NVIDIA H200", "memory_total_bytes": 150754820096, "compute_capability": "9.0"}]


def group_plan(rank=0, **kwargs):
    kwargs.setdefault("nodes", 2)
    kwargs.setdefault("interconnect", "roce")
    return plan(BF16, L40S, max_model_len=8192, node_rank=rank, master_addr="10.0.0.1", **kwargs)


def test_a_model_no_single_host_holds_spans_two_hosts():
    """Gemma-4-31B in BF16 (about 58 GiB of weights) on hosts of one 48 GiB card each."""
    with pytest.raises(PlanError, match=r"tensor_parallel_size=auto: the model does not fit on 1 GPU\(s\) of 48.0"):
        plan(BF16, L40S, max_model_len=8192)
    head, worker = group_plan(0), group_plan(1)
    assert (head["pipeline_parallel_size"], head["tensor_parallel_size"], head["replicas"]) == (2, 1, 1)
    assert head["vllm_args"]["pipeline-parallel-size"] == 2
    assert head["weight_bytes_per_gpu"] * 2 >= head["weight_bytes"]
    assert head["multinode"]["role"] == "head" and worker["multinode"]["role"] == "worker"
    assert {k: head["instances"][0]["args"][k] for k in ("nnodes", "node-rank", "master-addr")} == {
        "nnodes": 2, "node-rank": 0, "master-addr": "10.0.0.1"}
    assert "headless" not in head["instances"][0]["args"]
    assert worker["instances"][0]["args"]["headless"] is True and worker["instances"][0]["args"]["node-rank"] == 1
    # Both halves of one engine plan the same cache: the same stage, the same settings.
    assert head["kv_cache_tokens"] == worker["kv_cache_tokens"] > 8192


def test_a_host_that_fits_serves_alone_even_in_a_group():
    alone = plan(BF16, H200, max_model_len=8192, nodes=2, interconnect="roce", master_addr="10.0.0.1")
    assert alone["pipeline_parallel_size"] == 1 and alone["multinode"] is None
    assert "pipeline-parallel-size" not in alone["vllm_args"]


@pytest.mark.parametrize("kwargs, message", [
    ({"interconnect": ""}, "interconnect: ''; the plan spans 2 hosts (pipeline parallel), which exchange "
                           "activations every step: say how they are connected (infiniband, roce, ethernet)"),
    ({"pipeline_parallel_size": 3}, "pipeline_parallel_size=3: the serving group has 2 host(s)"),
    ({"pipeline_parallel_size": 80, "nodes": 80}, "pipeline_parallel_size=80 exceeds the model's 60 layers"),
    ({"nodes": 3, "rank": 2}, "node_rank=2: the plan spans the first 2 host(s) of the serving group"),
    ({"master_addr": ""}, "master_addr: empty; the workers reach the head"),
])
def test_what_cannot_span_hosts_is_refused_by_name(kwargs, message):
    rank = kwargs.pop("rank", 0)
    if "master_addr" in kwargs:
        with pytest.raises(PlanError, match=message):
            plan(BF16, L40S, max_model_len=8192, nodes=2, interconnect="roce", **kwargs)
        return
    with pytest.raises(PlanError) as err:
        group_plan(rank, **kwargs)
    assert message in str(err.value)


def test_ethernet_is_allowed_with_a_warning():
    warned = group_plan(0, interconnect="ethernet")["warnings"]
    assert any("pipeline parallel over 2 hosts on plain Ethernet" in w for w in warned)


def test_the_cpu_engine_does_not_span_hosts():
    with pytest.raises(PlanError, match="pipeline_parallel_size: the cpu engine serves one host alone"):
        plan(json.loads((ROOT / "roles/preflight/files/models/tiny-gemma4.json").read_text()), [], engine="cpu",
             cpu_kv_cache_bytes=1 << 30, max_model_len=1024, nodes=2)


def test_layers_are_split_as_vllm_splits_them():
    """vllm/distributed/utils.py get_pp_indices: the remainder goes to the stages before the last."""
    assert pp_partition(60, 2) == [30, 30]
    assert pp_partition(60, 7) == [8, 8, 9, 9, 9, 9, 8]
    assert pp_partition(10, 4) == [2, 3, 3, 2]
    shape = model_shape(BF16)
    assert len(stage_shape(shape, 7).layers) == 9 and stage_shape(shape, 1) is shape


# One engine over two hosts in a fleet: the rollout moves the group as one unit, the
# gateway and Prometheus reach the head alone (module_utils/rollout.py, gateway.py).
def fleet_plans():
    """head1+worker1 serve one engine; solo serves alone (an H200 holds the model)."""
    return {"head1": group_plan(0), "worker1": group_plan(1),
            "solo": plan(BF16, H200, max_model_len=8192)}


def test_the_gateway_reaches_a_group_at_its_head_alone():
    plans = fleet_plans()
    hosts = list(plans)
    found = upstreams(hosts, ["10.0.0.1", "10.0.0.2", "10.0.0.3"], [plans[h]["instances"] for h in hosts])
    assert [(u["host"], u["address"], u["port"]) for u in found] == [("head1", "10.0.0.1", 8000),
                                                                     ("solo", "10.0.0.3", 8000)]


def serving_instances(plans: dict) -> dict:
    """What vllm_service's preflight gives rollout_plan: the instances with an endpoint."""
    return {h: len([i for i in p["instances"] if not i["args"].get("headless")]) for h, p in plans.items()}


def test_a_group_changes_in_one_batch_and_counts_as_one_engine():
    counts = serving_instances(fleet_plans())
    assert counts == {"head1": 1, "worker1": 0, "solo": 1}
    result = rollout.plan(["head1", "worker1", "solo"], [1], counts, list(counts), 1, [["head1", "worker1"]])
    # the canary "host" is the whole group; the serve play's serial is the batches' sizes
    assert result["batches"] == [["head1", "worker1"], ["solo"]] and result["serial"] == [2, 1]
    assert result["serving_instances"] == 2
    # without the group, serial 1 would restart the worker alone: half an engine
    assert rollout.plan(["head1", "worker1", "solo"], [1], counts, list(counts), 1)["batches"][0] == ["head1"]


@pytest.mark.parametrize("hosts, limit_hosts, says", [
    (["head1", "solo", "worker1"], None, "preflight_serving_group: head1, worker1 serve one engine, but the "
                                         "inventory lists solo between them"),
    (["head1", "worker1", "solo"], ["worker1", "solo"], "--limit: worker1 and head1 serve one engine"),
])
def test_a_group_split_by_the_inventory_or_a_limit_is_refused(hosts, limit_hosts, says):
    counts = {"head1": 1, "worker1": 0, "solo": 1}
    with pytest.raises(rollout.RolloutError, match=re.escape(says)):
        rollout.plan(limit_hosts or hosts, [1], counts, list(counts), 1, [["head1", "worker1"]])


def test_a_group_whose_head_is_the_only_engine_needs_min_serving_zero():
    counts = {"head1": 1, "worker1": 0}
    with pytest.raises(rollout.RolloutError, match=r"batch 1 \(head1, worker1\) takes 1 of the 1 serving"):
        rollout.plan(["head1", "worker1"], [1], counts, list(counts), 1, [["head1", "worker1"]])
