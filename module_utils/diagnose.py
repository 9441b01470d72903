"""What is wrong with an inference host, from evidence read on it: a verdict per check
(``ok``, ``problem`` or ``unknown``) and the evidence behind it.  Read-only.

``gather(...)`` reads the evidence (systemd, the journal, each instance's /metrics,
/v1/models and /version, the snapshot on disk against the pinned revision's files,
the kernel's THP and sysctl values, the disk under the model root, NVML where there is a
GPU); ``verdicts(evidence, expected)`` turns it into lines.  Something that could not be
read is ``unknown``, never ``ok``.  Plain Python (the module library/vllm_diagnose.py
wraps it); what the checks rely on is in docs/diagnose.md.
"""
from __future__ import annotations

import json
import os
import re
import urllib.error

from ansible.module_utils.gateway import WILDCARDS
from ansible.module_utils.hf_snapshot import bad_files
from ansible.module_utils.vllm_probe import request

# Journal lines that explain a start that failed for memory (vLLM's own messages).
OOM = re.compile(r"CUDA out of memory|OutOfMemoryError|larger than the available KV cache memory|"
                 r"No available memory for the cache blocks|larger than the maximum number of tokens")


def instance_url(args: dict, port: int) -> str:
    host = str(args.get("host", ""))
    return "http://%s:%d" % ("127.0.0.1" if host in WILDCARDS else host, port)


def _get(url: str, api_key: str = "", opener=None):
    """(status, body) or (None, the error)."""
    try:
        kwargs = {"api_key": api_key, "timeout": 10}
        if opener:
            kwargs["opener"] = opener
        return request(url, **kwargs)
    except (OSError, urllib.error.URLError, ValueError) as exc:
        return None, str(getattr(exc, "reason", exc))


def sample_sum(metrics: str, name: str) -> float | None:
    """The sum of a series' samples in a /metrics text (None when it has none)."""
    values = [float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
              if line.split("{", 1)[0].split(" ", 1)[0] == name]
    return sum(values) if values else None


def gather(instances: list, api_key: str, files: list, run, read, statvfs, *, model_root: str,
           sysctl: dict, max_num_seqs: int = 0, config_dir: str = "/etc/vllm", opener=None, nvml=None) -> dict:
    """The evidence.  ``instances``: the plan's (name, port, args); ``files``: the pinned
    revision's files (name, size, hash; empty when the hub did not answer); ``run(argv)``
    -> (rc, out); ``read(path)`` -> text or None; ``statvfs(path)``; ``nvml``: the pynvml
    module or None."""
    found = []
    for inst in instances:
        name, url = inst["name"], instance_url(inst["args"], int(inst["port"]))
        rc, out = run(["systemctl", "show", "vllm@%s.service" % name, "--property",
                       "ActiveState,SubState,NRestarts,Result,ControlGroup"])
        unit = dict(line.split("=", 1) for line in out.splitlines() if "=" in line) if rc == 0 else {}
        procs = read("/sys/fs/cgroup%s/cgroup.procs" % unit["ControlGroup"]) if unit.get("ControlGroup") else None
        rc, journal = run(["journalctl", "--no-pager", "--output=cat", "--lines=400", "--unit",
                           "vllm@%s.service" % name])
        status, metrics = _get(url + "/metrics", opener=opener)
        models_status, models = _get(url + "/v1/models", api_key, opener=opener)
        version_status, version = _get(url + "/version", opener=opener)
        # the model path the instance runs with: its configuration on the host
        config = read("%s/%s.yaml" % (config_dir, name)) or ""
        match = re.search(r"^model: (.*)$", config, re.M)
        snapshot = json.loads(match.group(1)) if match and match.group(1).startswith('"') else (
            match.group(1).strip() if match else "")
        found.append({
            "name": name, "url": url, "unit": unit,
            "pids": [int(pid) for pid in (procs or "").split()],
            "journal": [line for line in (journal.splitlines() if rc == 0 else []) if OOM.search(line)][-3:],
            "metrics": metrics if status == 200 else None,
            "metrics_error": None if status == 200 else "%s/metrics: %s" % (url, metrics),
            "models": [m["id"] for m in models.get("data", [])] if models_status == 200 and isinstance(models, dict)
            else None,
            "models_error": None if models_status == 200 else "%s/v1/models: %s" % (url, models),
            "version": (version.get("version") if isinstance(version, dict) else None) if version_status == 200
            else None,
            "max_num_seqs": inst["args"].get("max-num-seqs") or max_num_seqs or None,
            "snapshot": snapshot,
        })
    snapshots = sorted({i["snapshot"] for i in found if i["snapshot"]})
    checked = {}
    for folder in snapshots:
        if not os.path.isdir(folder):
            checked[folder] = {"exists": False}
            continue
        template = os.path.isfile(os.path.join(folder, "chat_template.jinja")) or "chat_template" in (
            read(os.path.join(folder, "tokenizer_config.json")) or "")
        checked[folder] = {"exists": True, "bad_files": bad_files(folder, files) if files else None,
                           "chat_template": template}
    thp = read("/sys/kernel/mm/transparent_hugepage/enabled")
    space = statvfs(model_root) if os.path.isdir(model_root) else None
    return {
        "instances": found, "snapshots": checked,
        "thp": re.search(r"\[(\w+)\]", thp).group(1) if thp and "[" in thp else None,
        "sysctl": {key: (read("/proc/sys/" + key.replace(".", "/")) or "").strip() or None for key in sysctl},
        "disk": {"free": space.f_bavail * space.f_frsize, "size": space.f_blocks * space.f_frsize} if space else None,
        "gpu_processes": gpu_processes(nvml) if nvml else None,
    }


def gpu_processes(nvml) -> list | str:
    """Every process NVML sees on a GPU (pid, MiB), or why it could not tell."""
    try:
        nvml.nvmlInit()
        found = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            for proc in nvml.nvmlDeviceGetComputeRunningProcesses(handle):
                found.append({"gpu": index, "pid": proc.pid, "mib": (proc.usedGpuMemory or 0) >> 20})
        return found
    except Exception as exc:  # any NVML failure is reported, never taken for "no process"
        return "NVML: %s" % exc


def _line(check: str, state: str, evidence: str) -> dict:
    return {"check": check, "verdict": state, "evidence": evidence}


def instance_verdicts(inst: dict, expected: dict) -> list:
    name, unit = inst["name"], inst["unit"]
    lines = []
    state = unit.get("ActiveState")
    if not state:
        lines.append(_line("%s: unit" % name, "unknown", "systemctl show vllm@%s answered nothing" % name))
    else:
        restarts = unit.get("NRestarts", "0")
        lines.append(_line("%s: unit" % name, "ok" if state == "active" else "problem",
                           "vllm@%s is %s (%s), restarted %s time(s) by systemd, last result %s"
                           % (name, state, unit.get("SubState", "?"), restarts, unit.get("Result", "?"))))
    if inst["journal"]:
        lines.append(_line("%s: start-up memory" % name, "problem",
                           "the journal says: %s (the plan's context and KV cache do not fit the memory "
                           "left: check other processes on the GPU, lower preflight_max_model_len or "
                           "gpu_memory_utilization)" % " | ".join(inst["journal"])))
    else:
        lines.append(_line("%s: start-up memory" % name, "ok", "no out-of-memory line in the last 400 of its journal"))
    metrics = inst["metrics"]
    if metrics is None:
        lines.append(_line("%s: queue" % name, "unknown", inst["metrics_error"]))
    else:
        waiting = sample_sum(metrics, "vllm:num_requests_waiting")
        running = sample_sum(metrics, "vllm:num_requests_running")
        queued = sample_sum(metrics, "vllm:request_queue_time_seconds_sum")
        count = sample_sum(metrics, "vllm:request_queue_time_seconds_count")
        mean = (queued / count) if queued is not None and count else 0.0
        limit = inst["max_num_seqs"]
        if waiting is None or running is None:
            lines.append(_line("%s: queue" % name, "unknown", "/metrics has no vllm:num_requests_* series "
                               "(is --disable-log-stats set?)"))
        else:
            full = waiting > 0 and (limit is None or running >= int(limit))
            lines.append(_line("%s: queue" % name, "problem" if full else "ok",
                               "%d running%s, %d waiting, %.2fs mean queue time since start%s"
                               % (running, " of %s (max-num-seqs)" % limit if limit else "", waiting, mean,
                                  ": requests wait for a free slot, so clients time out; add instances or "
                                  "hosts, or lower the clients' concurrency at the gateway" if full else "")))
    if inst["models"] is None:
        lines.append(_line("%s: served model" % name, "unknown", inst["models_error"]))
    else:
        want = expected.get("served_model_name")
        lines.append(_line("%s: served model" % name, "ok" if want in inst["models"] else "problem",
                           "/v1/models lists %s; clients ask for %s%s"
                           % (", ".join(inst["models"]) or "nothing", want,
                              "" if want in inst["models"] else ": they get 404 (the model does not exist); "
                              "set vllm_fleet_served_model_name to the name they send, or fix the clients")))
    if inst["version"] is None:
        lines.append(_line("%s: engine version" % name, "unknown", "%s/version did not answer" % inst["url"]))
    else:
        want = expected.get("vllm_version")
        lines.append(_line("%s: engine version" % name, "ok" if not want or inst["version"] == want else "problem",
                           "the engine runs vLLM %s; the plan is for %s" % (inst["version"], want or "any")))
    return lines


def host_verdicts(evidence: dict, expected: dict) -> list:
    lines = []
    revision = expected.get("revision")
    for inst in evidence["instances"]:
        if not inst["snapshot"]:
            lines.append(_line("%s: revision" % inst["name"], "unknown", "no model path in its configuration"))
        elif revision:
            pinned = os.path.basename(inst["snapshot"].rstrip("/")) == revision
            lines.append(_line("%s: revision" % inst["name"], "ok" if pinned else "problem",
                               "it serves %s; the fleet pins %s" % (inst["snapshot"], revision)))
    for folder, snap in sorted(evidence["snapshots"].items()):
        if not snap["exists"]:
            lines.append(_line("snapshot", "problem", "%s is not on disk" % folder))
            continue
        bad = snap["bad_files"]
        if bad is None:
            lines.append(_line("snapshot", "unknown", "%s: the pinned revision's file list could not be read from "
                               "the hub or mirror, so its files were not compared" % folder))
        else:
            lines.append(_line("snapshot", "problem" if bad else "ok",
                               "%s: %s" % (folder, "differs from the pinned revision in %s (size or hash): the "
                                           "engine may answer garbled text; remove the folder and re-run "
                                           "site.yml to download it again" % ", ".join(bad) if bad
                                           else "every file matches the pinned revision's size and hash")))
        lines.append(_line("chat template", "ok" if snap["chat_template"] else "problem",
                           "%s %s" % (folder, "has a chat template" if snap["chat_template"] else
                                      "has no chat template (chat_template.jinja or tokenizer_config.json): "
                                      "chat completions fail or come out unformatted")))
    tokenizer = expected.get("tokenizer_problem")
    lines.append(_line("tokenizer", "unknown" if tokenizer == "unknown" else ("problem" if tokenizer else "ok"),
                       tokenizer if tokenizer and tokenizer != "unknown" else
                       ("the engine's Python could not be asked" if tokenizer == "unknown"
                        else "tokenizer.json loads as a fast tokenizer")))
    want_thp = expected.get("thp")
    if want_thp:
        have = evidence["thp"]
        lines.append(_line("transparent hugepages", "unknown" if have is None else
                           ("ok" if have == want_thp else "problem"),
                           "enabled is %s; os_tuning set %s" % (have or "unreadable", want_thp)))
    drifted = {k: (v, str(expected["sysctl"][k])) for k, v in evidence["sysctl"].items()
               if v is not None and v.split() != str(expected["sysctl"][k]).split()}
    unread = sorted(k for k, v in evidence["sysctl"].items() if v is None)
    if evidence["sysctl"]:
        lines.append(_line("sysctl", "problem" if drifted else ("unknown" if unread else "ok"),
                           "; ".join("%s is %s, os_tuning set %s" % (k, v, w) for k, (v, w) in sorted(drifted.items()))
                           or ("unreadable: %s" % ", ".join(unread) if unread else
                               "%d value(s) as os_tuning set them" % len(evidence["sysctl"]))))
    firewall = expected.get("firewall")
    if firewall is not None:
        lines.append(_line("firewall", "problem" if firewall else "ok",
                           "; ".join(firewall) + " (site.yml reloads it)" if firewall else
                           "the live table closes the engine ports to all but the gateways and monitoring hosts"))
    disk = evidence["disk"]
    if disk is None:
        lines.append(_line("disk under the model root", "unknown", "%s does not exist" % expected["model_root"]))
    else:
        ratio = disk["free"] / disk["size"] if disk["size"] else 0.0
        lines.append(_line("disk under the model root", "problem" if ratio < expected.get("disk_free_ratio", 0.1)
                           else "ok", "%.1f GiB free of %.1f GiB (%.0f %%) under %s"
                           % (disk["free"] / 2 ** 30, disk["size"] / 2 ** 30, 100 * ratio, expected["model_root"])))
    engine = expected.get("engine")
    if engine == "cuda":
        procs = evidence["gpu_processes"]
        if procs is None or isinstance(procs, str):
            lines.append(_line("GPU memory", "unknown", procs or "NVML (nvidia-ml-py) is not importable here"))
        else:
            engines = {pid for inst in evidence["instances"] for pid in inst["pids"]}
            others = [p for p in procs if p["pid"] not in engines]
            lines.append(_line("GPU memory", "problem" if others else "ok",
                               "other processes hold GPU memory: %s (the next start of vLLM may not fit)"
                               % ", ".join("pid %d %d MiB on GPU %d" % (p["pid"], p["mib"], p["gpu"]) for p in others)
                               if others else "only the engines' processes hold GPU memory"))
        drift = expected.get("driver")
        if drift is None:
            lines.append(_line("driver", "unknown", "the driver's facts were not read"))
        else:
            lines.append(_line("driver", "problem" if drift.get("drift") else "ok",
                               "; ".join(drift.get("drift") or []) or "the loaded driver is %s, its packages and "
                               "fabric manager agree" % (drift.get("loaded") or {}).get("version", "?")))
    else:
        lines.append(_line("GPU memory and driver", "ok", "not applicable: the %s engine has no GPU" % engine))
    return lines


def verdicts(evidence: dict, expected: dict) -> list:
    lines = [line for inst in evidence["instances"] for line in instance_verdicts(inst, expected)]
    return lines + host_verdicts(evidence, expected)


def table(lines: list) -> list:
    width = max(len(line["check"]) for line in lines)
    return ["%-*s  %-7s  %s" % (width, line["check"], line["verdict"].upper() if line["verdict"] != "ok" else "ok",
                                line["evidence"]) for line in lines]


def tokenizer_check(python: str, folder: str, run) -> str | None:
    """tokenizer.json loads as a fast tokenizer in the engine's own Python; "unknown" when
    that Python cannot be run."""
    if not python or not os.path.isfile(python):
        return "unknown"
    code = "import sys; from tokenizers import Tokenizer; Tokenizer.from_file(sys.argv[1])"
    path = os.path.join(folder, "tokenizer.json")
    if not os.path.isfile(path):
        return "no tokenizer.json in %s: vLLM needs a fast tokenizer" % folder
    rc, out = run([python, "-c", code, path])
    return None if rc == 0 else "tokenizer.json does not load as a fast tokenizer: %s" % out.strip()[-300:]


def exec_python(unit_exec_start: str) -> str:
    """The Python of a unit's ExecStart (systemctl show's ``{ path=... ; argv[]=... }``)."""
    match = re.search(r"argv\[\]=(\S+)", unit_exec_start or "")
    return match.group(1) if match else ""
