"""How a change reaches a serving fleet: the batches of hosts (Ansible's ``serial``) and the
capacity guard, checked before any host changes.

Plain Python, no Ansible imports; ``library/rollout_plan.py`` wraps it.  The batches are
computed as ansible-core's ``PlaybookExecutor._get_serialized_batches`` does (a number, or
a percentage of the play's hosts rounded down and at least 1; the last size repeats), so
what the guard checks is what the serve play runs.  Every message starts with the
variable it is about.
"""
from __future__ import annotations

import re

PERCENT = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*%\s*$")
# --limit patterns that are not plain names: wildcards, regular expressions, ranges, files.
PATTERN = re.compile(r"[*?\[\]~@]")


class RolloutError(ValueError):
    pass


def batch_size(item, total: int) -> int:
    """One element of ``serial``: a whole number of hosts or ``'N%'`` of ``total``."""
    if isinstance(item, bool):
        raise RolloutError("%r is not a number of hosts or a percentage" % (item,))
    if isinstance(item, int):
        size = item
    else:
        match = PERCENT.match(str(item))
        if match:
            percent = float(match.group(1))
            if not 0 < percent <= 100:
                raise RolloutError("%r: a percentage is above 0 and at most 100" % (item,))
            return max(1, int(total * percent / 100))
        try:
            size = int(str(item))
        except ValueError:
            raise RolloutError("%r is not a number of hosts or a percentage like '25%%'" % (item,)) from None
    if size < 1:
        raise RolloutError("%r: a batch has at least one host" % (item,))
    return size


def batches(hosts: list, serial) -> list:
    """The hosts in the batches Ansible runs them in."""
    serial = serial if isinstance(serial, list) else [serial]
    if not serial:
        raise RolloutError("an empty list; give batch sizes like [1, '100%']")
    sizes = [batch_size(item, len(hosts)) for item in serial]
    remaining, result, index = list(hosts), [], 0
    while remaining:
        size = sizes[min(index, len(sizes) - 1)]
        result.append(remaining[:size])
        remaining = remaining[size:]
        index += 1
    return result


def unknown_limit(limit: str, known: list) -> list:
    """The plain names of an ``--limit`` that are neither hosts nor groups of the inventory
    (Ansible only warns about them and changes the others)."""
    names = []
    for part in re.split(r"[,:]", limit or ""):
        name = part.strip().lstrip("&!")
        if name and not PATTERN.search(name) and name not in known and name != "all":
            names.append(name)
    return names


def units(hosts: list, groups: list | None) -> list:
    """The hosts as the rollout moves them: a serving group (the hosts of one engine across
    hosts, head first) is one unit, every other host a unit of its own.  A group's hosts
    must follow one another in ``hosts`` (Ansible's ``serial`` cuts the play's hosts in
    their inventory order) and be all in the play or all out of it (a ``--limit`` that
    splits a group would restart half an engine)."""
    owner = {}
    for group in groups or []:
        for host in group:
            if host in owner and owner[host] != group:
                raise RolloutError("preflight_serving_group: %s is in two serving groups, %s and %s"
                                   % (host, ", ".join(owner[host]), ", ".join(group)))
            owner[host] = group
    result, seen = [], set()
    for index, host in enumerate(hosts):
        group = owner.get(host)
        if not group:
            result.append([host])
            continue
        if tuple(group) in seen:
            continue
        seen.add(tuple(group))
        outside = [h for h in group if h not in hosts]
        if outside:
            raise RolloutError("--limit: %s and %s serve one engine (preflight_serving_group); a change reaches "
                               "the whole group or none of it: add %s to the limit or leave the group out"
                               % (", ".join(h for h in group if h in hosts), ", ".join(outside), ", ".join(outside)))
        if hosts[index:index + len(group)] != [h for h in hosts if h in group]:
            between = [h for h in hosts[index:] if h not in group][:1]
            raise RolloutError("preflight_serving_group: %s serve one engine, but the inventory lists %s between "
                               "them: list a group's hosts one after another in the inventory group inference"
                               % (", ".join(group), ", ".join(between)))
        result.append([h for h in hosts if h in group])
    return result


def plan(hosts: list, serial, instances: dict, serving: list, min_serving: int, groups: list | None = None) -> dict:
    """The rollout of ``hosts`` (the play's inference hosts, in order).

    ``instances``: every inference host of the fleet (also those outside a ``--limit``)
    with the instances it serves an endpoint for (a serving group's workers: none);
    ``serving``: the hosts that serve now; ``groups``: the serving groups, each moved as
    one unit (``serial`` counts units, and the returned ``serial`` is the batches' sizes in
    hosts).  A batch takes all of its hosts out of rotation at once; what serves meanwhile
    is the instances of the serving hosts outside it, which must be at least
    ``min_serving``.  When no host serves yet there is nothing to protect: every host at once.
    """
    if isinstance(min_serving, bool) or not isinstance(min_serving, int) or min_serving < 0:
        raise RolloutError("vllm_fleet_min_serving: %r is not a whole number >= 0" % (min_serving,))
    moved = units(hosts, groups)
    try:
        unit_batches = batches(moved, serial)
    except RolloutError as exc:
        raise RolloutError("vllm_fleet_rollout_serial: %s" % exc) from None
    planned = [[h for unit in batch for h in unit] for batch in unit_batches]
    serving_now = [h for h in instances if h in serving]
    unseen = outside(hosts, instances)
    if not serving_now:
        return {"serial": [max(1, len(hosts))], "batches": [list(hosts)] if hosts else [],
                "serving_instances": 0,
                "reason": "no inference host serves yet: every host at once" + unseen}
    total = sum(instances[h] for h in serving_now)
    problems = []
    for number, batch in enumerate(planned, 1):
        left = total - sum(instances[h] for h in batch if h in serving)
        if left < min_serving:
            problems.append(
                "batch %d (%s) takes %d of the %d serving instance(s) out of rotation and leaves %d"
                % (number, ", ".join(batch), total - left, total, left))
    if problems:
        hint = ("use smaller batches, e.g. vllm_fleet_rollout_serial: [1]"
                if any(len(batch) > 1 for batch in unit_batches) else
                "even one host at a time leaves too few: add inference hosts or instances, or lower "
                "vllm_fleet_min_serving (0 accepts that a change stops serving)")
        raise RolloutError("vllm_fleet_rollout_serial: %s; vllm_fleet_min_serving is %d: %s"
                           % ("; ".join(problems), min_serving, hint))
    return {"serial": [len(batch) for batch in planned], "batches": planned,
            "serving_instances": total,
            "reason": "%d serving instance(s); at least %d serve during each batch%s%s"
                      % (total, min_serving, "; each serving group in one batch" if groups else "", unseen)}


def outside(hosts: list, instances: dict) -> str:
    """What a run over ``hosts`` cannot see of the fleet (``instances``' hosts): those outside
    it (a --limit, a slice of AWX's job slicing) are counted as they served when the run
    began; a run over them at the same time is not seen.  '' when the run holds them all."""
    left = [h for h in instances if h not in hosts]
    if not left:
        return ""
    named = ", ".join(left[:5]) + (" and %d more" % (len(left) - 5) if len(left) > 5 else "")
    return ("; %d inference host(s) outside this run (%s) are counted as serving as they did when it began: "
            "a change running on them at the same time (another --limit, another slice) is not seen, so keep "
            "vllm_fleet_min_serving met by each slice alone" % (len(left), named))
