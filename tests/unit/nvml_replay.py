"""A stand-in for the nvidia-ml-py (pynvml) interface that answers from a recorded
snapshot, so read_nvml() is exercised without a GPU.  It behaves as the real
binding does where the project's NVML pitfalls are concerned: calls for a missing
value raise NVMLError with NVML's text, links past the last raise, and
nvmlDeviceGetP2PStatus refuses the (0,) tuple the bindings define."""
from __future__ import annotations

from types import SimpleNamespace


class NVMLError(Exception):
    def __str__(self):
        return "NVMLError: %s" % self.args[0]


class ReplayNVML:
    NVMLError = NVMLError
    NVML_NVLINK_MAX_LINKS = 36
    NVML_P2P_CAPS_INDEX_READ = (0,)  # as nvidia-ml-py defines it

    def __init__(self, snapshot: dict):
        self.snap = snapshot
        self.shutdown = False

    def _answer(self, value):
        if isinstance(value, dict) and "err" in value:
            raise NVMLError(value["err"])
        return value

    def nvmlInit(self):
        if self.snap.get("error"):
            raise NVMLError(self.snap["error"].split(": ", 1)[-1])

    def nvmlShutdown(self):
        self.shutdown = True

    def nvmlSystemGetDriverVersion(self):
        return self._answer(self.snap["driver"])

    def nvmlSystemGetCudaDriverVersion(self):
        return self._answer(self.snap["cuda_driver"])

    def nvmlDeviceGetCount(self):
        return len(self.snap["devices"])

    def nvmlDeviceGetHandleByIndex(self, index):
        return self.snap["devices"][index]

    def _field(key, convert=lambda v: v):
        def getter(self, dev):
            return convert(self._answer(dev[key]))
        return getter

    nvmlDeviceGetName = _field("name")
    nvmlDeviceGetUUID = _field("uuid")
    nvmlDeviceGetCudaComputeCapability = _field("cc", tuple)
    nvmlDeviceGetMemoryInfo = _field("mem_total", lambda v: SimpleNamespace(total=v))
    nvmlDeviceGetPersistenceMode = _field("persistence")
    nvmlDeviceGetMigMode = _field("mig_mode")
    nvmlDeviceGetEccMode = _field("ecc_mode")
    nvmlDeviceGetMaxPcieLinkGeneration = _field("pcie_gen_max")
    nvmlDeviceGetMaxPcieLinkWidth = _field("pcie_width_max")
    nvmlDeviceGetCurrPcieLinkGeneration = _field("pcie_gen_cur")
    nvmlDeviceGetPciInfo = _field("pci_bus_id", lambda v: SimpleNamespace(busId=v.encode()))

    def _link(self, dev, link):
        links = dev["nvlink"]
        if link >= len(links):
            raise NVMLError("Invalid Argument")
        return self._answer(links[link])

    def nvmlDeviceGetNvLinkState(self, dev, link):
        return self._link(dev, link)["state"]

    def nvmlDeviceGetNvLinkRemotePciInfo(self, dev, link):
        return SimpleNamespace(busId=self._link(dev, link)["remote_pci"].encode())

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, dev, link):
        kind = self._link(dev, link).get("remote_type")
        if kind is None:
            raise NVMLError("Not Supported")
        return kind

    def _pair(self, a, b):
        return next(p for p in self.snap["pairs"] if (p["a"], p["b"]) == (a["index"], b["index"]))

    def nvmlDeviceGetTopologyCommonAncestor(self, a, b):
        return self._answer(self._pair(a, b)["common_ancestor"])

    def nvmlDeviceGetP2PStatus(self, a, b, index):
        if not isinstance(index, int):
            raise TypeError("an integer is required (got %r)" % (index,))
        return self._answer(self._pair(a, b)["p2p_read"])
