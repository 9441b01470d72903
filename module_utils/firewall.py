"""The engines' firewall as the kernel holds it, against what the fleet asked for.

Plain Python, no Ansible imports; ``library/firewall_check.py`` wraps it.  The role writes
one nftables table (``inet vllm_fleet``, ``roles/vllm_service/templates/firewall.nft.j2``):
loopback accepted, new connections to a stopping instance's port (the set ``draining``)
reset, the engine ports accepted from the gateways and monitoring hosts, every other
connection to them reset.  Which ports are draining is the instances' state, not the
fleet's: the set's elements are not compared.  A ``nft flush ruleset`` (what Debian's
``/etc/nftables.conf`` starts with, so every ``systemctl restart nftables``) or a hand
edit removes or changes it while the file on disk and its loader unit still look right;
only the live ruleset tells.  ``problems()`` compares ``nft -j list table inet
vllm_fleet`` (libnftables' JSON, docs/firewall.md) with the expected rules, in order.
"""
from __future__ import annotations

import json

TABLE = ("inet", "vllm_fleet")
# the named set of the ports whose instances are stopping, as a rule refers to it
DRAINING = "@draining"


def expected(ports: list, ipv4: list, ipv6: list) -> list:
    """The rules of the table's input chain, in order, as ``rules()`` reads them back."""
    ports = frozenset(int(p) for p in ports)
    wanted = [("iif", "lo", "accept"), ("tcp dport", DRAINING, "ct state", "new", "reject", "tcp reset")]
    if ipv4:
        wanted.append(("tcp dport", ports, "ip saddr", frozenset(ipv4), "accept"))
    if ipv6:
        wanted.append(("tcp dport", ports, "ip6 saddr", frozenset(ipv6), "accept"))
    wanted.append(("tcp dport", ports, "reject", "tcp reset"))
    return wanted


def _values(right) -> frozenset:
    if isinstance(right, dict) and "set" in right:
        return frozenset(right["set"])
    return frozenset([right])


def _rule(expr: list) -> tuple:
    """One rule's expressions, read into the shape of ``expected()``; an expression this
    reader does not know makes the rule read as unknown (so it never matches)."""
    out: list = []
    for part in expr:
        match = part.get("match") or {}
        if match.get("op") == "in" and match["left"].get("ct", {}).get("key") == "state":
            out += ["ct state", match["right"]]  # a flag matches with "in"
        elif match.get("op") == "==":
            left, right = match["left"], match["right"]
            if left.get("meta", {}).get("key") in ("iif", "iifname"):
                out += ["iif", right]
            elif "payload" in left:
                payload = left["payload"]
                name = "%s %s" % (payload.get("protocol"), payload.get("field"))
                if isinstance(right, str) and right.startswith("@"):  # a named set
                    out += [name, right]
                elif name == "tcp dport":
                    out += [name, frozenset(int(v) for v in _values(right))]
                else:
                    out += [name, _values(right)]
            else:
                return ("unknown", json.dumps(part, sort_keys=True))
        elif "accept" in part:
            out.append("accept")
        elif "reject" in part:
            out += ["reject", (part["reject"] or {}).get("type", "")]
        else:
            return ("unknown", json.dumps(part, sort_keys=True))
    return tuple(out)


def rules(listing: dict) -> tuple[dict | None, list]:
    """(the input chain or None, its rules) from ``nft -j list table inet vllm_fleet``."""
    chain, found = None, []
    for item in listing.get("nftables", []):
        if "chain" in item and item["chain"].get("name") == "input":
            chain = item["chain"]
        elif "rule" in item and item["rule"].get("chain") == "input":
            found.append(_rule(item["rule"].get("expr", [])))
    return chain, found


def _show(rule: tuple) -> str:
    return " ".join(",".join(sorted(map(str, p))) if isinstance(p, frozenset) else str(p) for p in rule)


def problems(listing: dict | None, ports: list, ipv4: list, ipv6: list) -> list:
    """What is wrong with the live table, in words; empty when it holds what is asked for.
    ``listing`` is None when the kernel has no such table."""
    if listing is None:
        return ["table %s %s is not loaded: the engine ports are open to every host" % TABLE]
    chain, found = rules(listing)
    if chain is None:
        return ["table %s %s has no input chain: the engine ports are open to every host" % TABLE]
    out = []
    if chain.get("hook") != "input" or chain.get("type") != "filter":
        out.append("chain input is not a filter on the input hook (%s %s)" % (chain.get("type"), chain.get("hook")))
    wanted = expected(ports, ipv4, ipv6)
    for index in range(max(len(wanted), len(found))):
        want = wanted[index] if index < len(wanted) else None
        have = found[index] if index < len(found) else None
        if want != have:
            out.append("rule %d is %s, expected %s" % (index + 1, _show(have) if have else "missing",
                                                         _show(want) if want else "none"))
    return out
