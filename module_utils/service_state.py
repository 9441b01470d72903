"""What a change of one host's vLLM instances is (role vllm_service), in one place.

The role stages the next configuration in ``next/`` beside the running one
(``/etc/vllm/<name>.yaml`` and ``.env``, the template unit ``vllm@.service``); ``plan``
reads both and says everything the task files act on: which files differ and how (the
change report), which instances restart, which retire, what is kept in ``previous/`` for
a rollback, which ports are open while the host changes, and the health gate's instances
after the change and, for a rollback, before it.  The task files only orchestrate.  Pure
Python: ``read(path)`` and ``existing`` come from the caller (library/vllm_service_state.py).
"""
from __future__ import annotations

import os

from ansible.module_utils.vllm_config import parse, staged_changes

UNIT = "vllm@.service"
# The port vLLM listens on when its config names none.
DEFAULT_PORT = 8000
# A wildcard bind is asked on loopback by the host itself.
WILDCARDS = ("0.0.0.0", "::", "")


def local_url(host, port) -> str:
    """Where the host itself asks an instance listening on host:port."""
    return "http://%s:%s" % ("127.0.0.1" if (host or "") in WILDCARDS else host, port)


def files(names: list, *, config_dir: str, unit: str, user: str) -> list:
    """Every file the instances ``names`` run with: {name (in next/ and previous/), live,
    kind (how a change of it is described), group, mode}; the unit first."""
    found = [{"name": UNIT, "live": unit, "kind": "unit", "group": "root", "mode": "0644"}]
    for name in names:
        found.append({"name": name + ".yaml", "live": os.path.join(config_dir, name + ".yaml"), "kind": "config",
                      "group": user, "mode": "0640"})
        found.append({"name": name + ".env", "live": os.path.join(config_dir, name + ".env"), "kind": "secret",
                      "group": "root", "mode": "0600"})
    return found


def plan(instances: list, existing: list, read, *, config_dir: str, next_dir: str, unit: str, user: str,
         model_path: str, version: str, staged_changed=()) -> dict:
    """The change from what runs to what is staged.

    ``instances``: the plan's ({name, port, args}); ``existing``: the names of the instances
    configured now (their ``<name>.yaml`` in ``config_dir``); ``read(path)``: a file's text or
    None; ``staged_changed``: in check mode, the staged files the staging tasks would have
    changed (they are not written, and still count)."""
    names = [inst["name"] for inst in instances]
    before = sorted(existing)
    settings = {}
    for name in before:
        text = read(os.path.join(config_dir, name + ".yaml"))
        if text is not None:
            settings[name] = parse(text)
    ours = files(names, config_dir=config_dir, unit=unit, user=user) if names else []
    staged = staged_changes([dict(item, staged=os.path.join(next_dir, item["name"])) for item in ours], read)
    changed = staged["changed"] + [name for name in staged_changed if name not in staged["changed"]]
    stale = names if UNIT in changed else [name for name in names if {name + ".yaml", name + ".env"} & set(changed)]
    ports = [int(inst["port"]) for inst in instances]
    ports_before = [int(value.get("port", DEFAULT_PORT)) for value in settings.values()]
    return {
        "before": before,
        "serving": bool(before),
        "retired": [name for name in before if name not in names],
        "settings": settings,
        "files": ours,
        "changed_files": changed,
        "details": staged["details"],
        "change": "; ".join("%s: %s" % (name, ", ".join(lines)) for name, lines in staged["details"].items()),
        "stale": stale,
        # what served before, whole (a rollback puts back every file of it)
        "kept": files(before, config_dir=config_dir, unit=unit, user=user) if before else [],
        "ports": sorted(set(ports)),
        "ports_before": sorted(set(ports_before)),
        "ports_changing": sorted(set(ports + ports_before)),
        "gate": [{"name": inst["name"], "url": local_url(inst["args"].get("host"), inst["port"]),
                  "model": inst["args"].get("served-model-name", model_path), "root": model_path,
                  "version": version, "headless": bool(inst["args"].get("headless", False))}
                 for inst in instances],
        "gate_before": [{"name": name, "url": local_url(value.get("host"), value.get("port", DEFAULT_PORT)),
                         "model": value.get("served-model-name", value.get("model")), "root": value.get("model"),
                         "version": "", "headless": bool(value.get("headless", False)),
                         "shutdown_timeout": int(value.get("shutdown-timeout", 0))}
                        for name, value in settings.items()],
    }
