"""GPU facts from NVML: a raw snapshot (what NVML answered) and the facts derived from it.

``read_nvml(nvml)`` makes the NVML calls through an object with the nvidia-ml-py
(``pynvml``) interface and returns a JSON-able snapshot, errors included, in the
shape of tests/fixtures/nvml/h200-single-gpu-host.json.  ``build_facts(snapshot)`` is
pure and decides everything else, so recorded snapshots are the unit-test fixtures.

NVML pitfalls handled (docs/platforms.md, NVML):
* ``NVML_NVLINK_MAX_LINKS`` is 18 in older bindings and 36 in newer ones: links are
  read until NVML answers NotSupported / InvalidArgument.
* ``NVML_P2P_CAPS_INDEX_READ`` is the tuple ``(0,)`` in the bindings: the integer is passed.
* PCIe-only and passthrough GPUs raise NotSupported on NVLink calls: recorded, not fatal.
* NVML ignores CUDA_VISIBLE_DEVICES; under MIG the parent GPU's capability is read.
"""
from __future__ import annotations

TOPOLOGY_LEVELS = {0: "SAME_BOARD", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
P2P_STATUS = {0: "ok", 1: "chipset_not_supported", 2: "gpu_not_supported",
              3: "ioh_topology_not_supported", 4: "disabled_by_regkey", 5: "not_supported",
              6: "unknown"}
NVLINK_DEVICE_SWITCH = 2  # NVML_NVLINK_DEVICE_TYPE_SWITCH


def _err(exc) -> str:
    text = str(exc)
    return text[len("NVMLError: "):] if text.startswith("NVMLError: ") else text


def _call(nvml, name, *args):
    """Return NVML's answer, or {"err": text} when it raises an NVML error."""
    try:
        value = getattr(nvml, name)(*args)
    except nvml.NVMLError as exc:
        return {"err": _err(exc)}
    if isinstance(value, bytes):
        value = value.decode()
    return list(value) if isinstance(value, tuple) else value


def _int_index(value) -> int:
    return value[0] if isinstance(value, tuple) else value


def read_links(nvml, handle) -> list:
    links = []
    for link in range(int(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18))):
        state = _call(nvml, "nvmlDeviceGetNvLinkState", handle, link)
        if isinstance(state, dict):  # NotSupported / InvalidArgument: no more links
            links.append({"link": link, "err": state["err"]})
            break
        entry = {"link": link, "state": int(state)}
        if state:
            remote = _call(nvml, "nvmlDeviceGetNvLinkRemotePciInfo", handle, link)
            entry["remote_pci"] = remote["err"] if isinstance(remote, dict) else _bus_id(remote)
            kind = _call(nvml, "nvmlDeviceGetNvLinkRemoteDeviceType", handle, link)
            entry["remote_type"] = None if isinstance(kind, dict) else int(kind)
        links.append(entry)
    return links


def _bus_id(pci) -> str:
    bus = getattr(pci, "busId", None) or getattr(pci, "busIdLegacy", "")
    return bus.decode() if isinstance(bus, bytes) else str(bus)


def read_nvml(nvml) -> dict:
    """Query NVML; never raises for a host without GPUs or driver."""
    try:
        nvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return {"error": "NVML could not be initialised: %s" % _err(exc), "devices": []}
    try:
        snap = {"driver": _call(nvml, "nvmlSystemGetDriverVersion"),
                "cuda_driver": _call(nvml, "nvmlSystemGetCudaDriverVersion"),
                "devices": [], "pairs": []}
        handles = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            handles.append(handle)
            memory = _call(nvml, "nvmlDeviceGetMemoryInfo", handle)
            pci = _call(nvml, "nvmlDeviceGetPciInfo", handle)
            snap["devices"].append({
                "index": index,
                "name": _call(nvml, "nvmlDeviceGetName", handle),
                "uuid": _call(nvml, "nvmlDeviceGetUUID", handle),
                "cc": _call(nvml, "nvmlDeviceGetCudaComputeCapability", handle),
                "mem_total": memory if isinstance(memory, dict) else int(memory.total),
                "persistence": _call(nvml, "nvmlDeviceGetPersistenceMode", handle),
                "mig_mode": _call(nvml, "nvmlDeviceGetMigMode", handle),
                "ecc_mode": _call(nvml, "nvmlDeviceGetEccMode", handle),
                "pcie_gen_max": _call(nvml, "nvmlDeviceGetMaxPcieLinkGeneration", handle),
                "pcie_width_max": _call(nvml, "nvmlDeviceGetMaxPcieLinkWidth", handle),
                "pcie_gen_cur": _call(nvml, "nvmlDeviceGetCurrPcieLinkGeneration", handle),
                "pci_bus_id": pci["err"] if isinstance(pci, dict) else _bus_id(pci),
                "nvlink": read_links(nvml, handle),
            })
        read_index = _int_index(nvml.NVML_P2P_CAPS_INDEX_READ)
        for a in range(len(handles)):
            for b in range(a + 1, len(handles)):
                snap["pairs"].append({
                    "a": a, "b": b,
                    "common_ancestor": _call(nvml, "nvmlDeviceGetTopologyCommonAncestor",
                                             handles[a], handles[b]),
                    "p2p_read": _call(nvml, "nvmlDeviceGetP2PStatus", handles[a], handles[b],
                                      read_index),
                })
        return snap
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # shutting down is best effort
            pass


def _ok(value) -> bool:
    return not isinstance(value, dict)


def _cc(value) -> str | None:
    return "%d.%d" % tuple(value[:2]) if _ok(value) and value else None


def _cuda_version(value) -> str | None:
    return "%d.%d" % (value // 1000, value % 1000 // 10) if isinstance(value, int) else None


def build_facts(snap: dict) -> dict:
    devices = snap.get("devices") or []
    if not devices:
        return {"gpus": [], "gpu_count": 0, "pairs": [], "nvlink_fully_connected": False,
                "nvswitch_present": False, "driver_version": None, "cuda_driver_version": None,
                "nccl_advice": {"env": {}, "vllm_args": {}, "notes": []},
                "reason": snap.get("error") or "NVML reports no GPU"}
    bus_to_index = {d["pci_bus_id"].lower(): d["index"] for d in devices
                    if isinstance(d.get("pci_bus_id"), str)}
    gpus, switch_linked, active_links = [], set(), {}
    direct: dict[tuple, int] = {}
    for dev in devices:
        active = [link for link in dev.get("nvlink", []) if link.get("state")]
        active_links[dev["index"]] = len(active)
        for link in active:
            remote = str(link.get("remote_pci", "")).lower()
            if link.get("remote_type") == NVLINK_DEVICE_SWITCH or (
                    link.get("remote_type") is None and remote not in bus_to_index):
                switch_linked.add(dev["index"])
            elif remote in bus_to_index and dev["index"] < bus_to_index[remote]:
                # each link shows at both ends: count it at the lower-indexed GPU
                pair = (dev["index"], bus_to_index[remote])
                direct[pair] = direct.get(pair, 0) + 1
        mig, ecc = dev.get("mig_mode"), dev.get("ecc_mode")
        gpus.append({
            "index": dev["index"], "name": dev.get("name"), "uuid": dev.get("uuid"),
            "compute_capability": _cc(dev.get("cc")),
            "memory_total_bytes": dev.get("mem_total") if _ok(dev.get("mem_total")) else None,
            "persistence_mode": dev.get("persistence") == 1,
            "mig_enabled": bool(_ok(mig) and mig and mig[0] == 1),
            "ecc_enabled": bool(_ok(ecc) and ecc and ecc[0] == 1),
            "pcie_generation": dev.get("pcie_gen_cur") if _ok(dev.get("pcie_gen_cur")) else None,
            "pcie_width": dev.get("pcie_width_max") if _ok(dev.get("pcie_width_max")) else None,
            "pci_bus_id": dev.get("pci_bus_id"),
            "nvlink_supported": not any("err" in link and link["link"] == 0
                                        for link in dev.get("nvlink", [])),
            "nvlink_active_links": len(active),
        })
    pairs = []
    for pair in snap.get("pairs", []):
        a, b = pair["a"], pair["b"]
        count = direct.get((a, b), 0)
        if count:
            link = "nvlink"
        elif a in switch_linked and b in switch_linked:
            # through the switch a pair can use as many links as the lesser GPU has;
            # nvidia-smi topo -m shows the same figure (NV18 on HGX H100/H200)
            link, count = "nvswitch", min(active_links[a], active_links[b])
        else:
            link = "pcie"
        ancestor, p2p = pair.get("common_ancestor"), pair.get("p2p_read")
        pairs.append({
            "gpus": [a, b], "link": link, "nvlink_count": count,
            "common_ancestor": TOPOLOGY_LEVELS.get(ancestor, ancestor) if _ok(ancestor) else None,
            "p2p_read": P2P_STATUS.get(p2p, str(p2p)) if _ok(p2p) else p2p["err"],
        })
    fully = len(gpus) > 1 and all(p["link"] != "pcie" for p in pairs)
    return {
        "driver_version": snap.get("driver") if _ok(snap.get("driver")) else None,
        "cuda_driver_version": _cuda_version(snap.get("cuda_driver")),
        "gpu_count": len(gpus), "gpus": gpus, "pairs": pairs,
        "nvlink_fully_connected": fully,
        "nvswitch_present": bool(switch_linked),
        "nccl_advice": nccl_advice(gpus, pairs, fully),
    }


def nccl_advice(gpus: list, pairs: list, fully_connected: bool) -> dict:
    """All-reduce advice for tensor parallelism on this host."""
    advice = {"env": {}, "vllm_args": {}, "notes": []}
    if len(gpus) < 2:
        return advice
    if fully_connected:
        advice["notes"].append("every GPU pair is NVLink/NVSwitch connected: NCCL and vLLM's "
                               "custom all-reduce use NVLink")
        return advice
    advice["vllm_args"]["disable-custom-all-reduce"] = True
    advice["notes"].append("PCIe-only GPU pairs: vLLM's custom all-reduce is off; prefer "
                           "tensor_parallel_size 1 replicas when the model fits one GPU")
    if any(p["p2p_read"] != "ok" for p in pairs if p["link"] == "pcie"):
        advice["env"]["NCCL_P2P_DISABLE"] = "1"
        advice["notes"].append("PCIe peer-to-peer is not available between some GPUs: "
                               "NCCL_P2P_DISABLE=1 avoids the all-reduce hangs it causes")
    if any(p["common_ancestor"] == "SYS" for p in pairs):
        advice["notes"].append("some GPU pairs cross the CPU interconnect (SYS): keep a "
                               "tensor-parallel group on one NUMA node")
    return advice
