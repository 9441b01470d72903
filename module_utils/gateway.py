"""The gateway's settings, checked before any host changes: its clients and their
limits, the allowlist, the TLS inputs and the engines it balances over.

Plain Python, no Ansible imports; ``library/gateway_plan.py`` wraps it and the role's
nginx template renders what ``plan()`` returns.  Client keys never pass through here:
the result names clients, the template pairs them with their keys.  Facts about nginx
the configuration relies on are in docs/gateway.md.
"""
from __future__ import annotations

import ipaddress
import re

NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
# Bearer tokens as they appear in a header: no quotes, spaces, '$' or '\' (the key also
# stands in nginx's configuration, inside a quoted string).
KEY = re.compile(r"^[A-Za-z0-9._~+/=-]{16,256}$")
SIZE = re.compile(r"^[1-9][0-9]*[kKmM]?$")
PATH = re.compile(r"^/[A-Za-z0-9._~/-]*$")
LIMITS = {"rate_per_second": "a whole number of requests per second > 0",
          "burst": "a whole number of requests >= 0",
          "connections": "a whole number of concurrent requests > 0",
          "max_body_size": "a size like 1048576, 512k or 1m"}


def size_bytes(size) -> int:
    """nginx's size syntax: ``1048576``, ``512k``, ``1m``."""
    text = str(size)
    scale = {"k": 1 << 10, "m": 1 << 20}.get(text[-1].lower(), 1)
    return int(text.rstrip("kKmM")) * scale


class GatewayError(ValueError):
    """Each message (several are joined by '; ') starts with the variable it is about."""


def _limit_problem(name: str, value) -> bool:
    if name == "max_body_size":
        return not SIZE.match(str(value))
    if isinstance(value, bool) or not isinstance(value, int):
        return True
    return value < (0 if name == "burst" else 1)


def _limits(where: str, given: dict, defaults: dict, problems: list) -> dict:
    out = {}
    for name in LIMITS:
        value = given.get(name, defaults.get(name))
        if _limit_problem(name, value):
            problems.append("%s%s: %r is not %s" % (where, name, value, LIMITS[name]))
        out[name] = value
    return out


def client_keys(given) -> tuple[list, str]:
    """A client's keys as a list, and what is wrong with how they were given.  ``given`` is
    the key, a list of keys, or the client's ``{key, keys}``: ``key`` (one) or ``keys``
    (several: during a rotation the new one and the old one, both admitted under the
    client's one name and limits)."""
    if isinstance(given, dict):
        if "key" in given and "keys" in given:
            return [], "has both key and keys; give key, or keys: [new, old] while it rotates"
        given = given.get("keys", given.get("key"))
    if isinstance(given, (list, tuple)):
        return list(given), "" if given else "keys is empty"
    return ([given] if given else []), ""


def clients(given: list, keys_given: list, defaults: dict) -> tuple[list, list]:
    """(clients with their limits, problems).  ``given`` are the clients without their
    keys, ``keys_given`` the keys in the same order, each a key or a list of keys (kept
    apart so that Ansible can hide them and nothing else)."""
    problems, result, names, keys = [], [], {}, {}
    _limits("gateway_", defaults, defaults, problems)
    if not given:
        problems.append("gateway_clients: no client is declared; the gateway would refuse every "
                        "request (give [{name, key}], the keys from ansible-vault)")
    for index, client in enumerate(given or []):
        where = "gateway_clients[%d]" % index
        if not isinstance(client, dict):
            problems.append("%s: is not a dict of name, key and limits" % where)
            continue
        name = client.get("name")
        label = "%s (%s)" % (where, name) if name else where
        unknown = sorted(set(client) - {"name"} - set(LIMITS))
        if unknown:
            problems.append("%s: unknown setting(s) %s; a client has name, key (or keys), %s"
                            % (label, ", ".join(unknown), ", ".join(LIMITS)))
        if not isinstance(name, str) or not NAME.match(name):
            problems.append("%s: name %r must be 1-32 lowercase letters, digits, '_' or '-'" % (label, name))
        elif name in names:
            problems.append("%s: the name %s is also %s's" % (label, name, names[name]))
        else:
            names[name] = where
        own, wrong = client_keys(keys_given[index] if index < len(keys_given) else None)
        if wrong or not own:
            problems.append("%s: %s" % (label, wrong or "has no key"))
        for number, key in enumerate(own):
            which = label if len(own) == 1 else "%s: keys[%d]" % (label, number)
            if not isinstance(key, str) or not KEY.match(key):
                problems.append("%s: the key must be 16-256 characters of letters, digits and ._~+/=-" % which)
            elif key.lower() in keys:
                # (compared without case: two keys that differ only in it are one guess apart)
                problems.append("%s: the key is also %s's (or differs from it only in letter case); every "
                                "client needs its own" % (which, keys[key.lower()]))
            else:
                keys[key.lower()] = where
        result.append(dict(name=name, **_limits(label + ".", client, defaults, problems)))
    return result, problems


# A name the server certificate and nginx's server_name carry: a DNS name or an IP literal.
DNS_NAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                      r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$")
WILDCARDS = ("0.0.0.0", "::", "")
# A host name or an IPv4/IPv6 address, as it stands in nginx's `server` and Prometheus's
# targets: nothing an inventory value could use to add a directive or a target.
ADDRESS = re.compile(r"^(?:[A-Za-z0-9_][A-Za-z0-9_.-]{0,252}|[0-9A-Fa-f.]*:[0-9A-Fa-f.]*:[0-9A-Fa-f:.]*)$")


def endpoint(address: str, port: int) -> str:
    """``address:port``, an IPv6 address in brackets."""
    return ("[%s]:%d" if ":" in address else "%s:%d") % (address, port)


def upstreams(hosts: list, addresses: list, instances: list) -> list:
    """Every instance of the inference hosts' plans as the gateway reaches it: the address
    the instance is bound to, or, bound to every address, the host's inventory address.
    A serving group's worker (``--headless``) serves no API: its engine answers at the
    head, so it is no upstream (and no scrape target)."""
    found = []
    for host, address, planned in zip(hosts, addresses, instances):
        for instance in planned or []:
            if instance["args"].get("headless"):
                continue
            bound = str(instance["args"].get("host", ""))
            reached = str((address or host) if bound in WILDCARDS else bound)
            if not ADDRESS.match(reached):
                raise GatewayError("%s of %s: %r is not a host name or an IP address"
                                   % ("ansible_host" if bound in WILDCARDS else "the host flag of instance "
                                      + str(instance["name"]), host, reached))
            found.append({"host": host, "instance": instance["name"], "port": int(instance["port"]),
                          "address": reached, "server": endpoint(reached, int(instance["port"]))})
    return sorted(found, key=lambda u: (u["host"], u["port"]))


def is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def valid_name(name) -> bool:
    """A DNS name or an IP address: what the certificate and nginx's server_name carry."""
    return isinstance(name, str) and bool(DNS_NAME.match(name) or is_ip(name))


def plan(given_clients: list, keys: list, defaults: dict, allowed_paths: list, tls: dict,
         upstreams: list, engine_key: str = "", address: str = "", other_names: list | None = None) -> dict:
    """What the nginx template renders; GatewayError naming each variable that is wrong.
    ``engine_key``: the engines' key, which the gateway sends them (checked, never
    returned).  The certificate's and server_name's names: ``address`` (the gateway's
    inventory address) first, then ``other_names`` that are valid ones (its inventory
    name, its own address), then ``tls["names"]`` (``gateway_tls_names``)."""
    result, problems = clients(given_clients, keys, defaults)
    if engine_key and not KEY.match(engine_key):
        problems.append("vllm_fleet_api_key: the engines' key must be 16-256 characters of letters, digits and "
                        "._~+/=- (the gateway sends it from nginx's configuration, where '$' starts a variable)")
    if address and not valid_name(address):
        problems.append("ansible_host: %r is not a DNS name or an IP address (it stands in the gateway's certificate "
                        "and in nginx's server_name)" % address)
    for index, name in enumerate(tls.get("names") or []):
        if not valid_name(name):
            problems.append("gateway_tls_names[%d]: %r is not a DNS name or an IP address (it stands in the "
                            "certificate and in nginx's server_name)" % (index, name))
    if not allowed_paths:
        problems.append("gateway_allowed_paths: empty; nothing would reach an engine")
    for index, path in enumerate(allowed_paths or []):
        if not isinstance(path, str) or not PATH.match(path):
            problems.append("gateway_allowed_paths[%d]: %r is not a path (/ then letters, digits, "
                            "'.', '_', '~', '-' or '/')" % (index, path))
    if len(set(map(str, allowed_paths or []))) != len(allowed_paths or []):
        problems.append("gateway_allowed_paths: a path is listed twice")
    if bool(tls.get("certificate")) != bool(tls.get("private_key")):
        given, missing = (("gateway_tls_certificate", "gateway_tls_private_key") if tls.get("certificate")
                          else ("gateway_tls_private_key", "gateway_tls_certificate"))
        problems.append("%s: given without %s; give both, or neither for a fleet CA" % (given, missing))
    if problems:
        raise GatewayError("; ".join(problems))
    names = unique(([address] if address else []) + [n for n in other_names or [] if valid_name(n)]
                   + list(tls.get("names") or []))
    return {"clients": result, "allowed_paths": list(allowed_paths),
            "largest_body_bytes": max(size_bytes(c["max_body_size"]) for c in result),
            "upstreams": upstreams, "names": names,
            "subject_alt_name": ["%s:%s" % ("IP" if is_ip(n) else "DNS", n) for n in names],
            "name_constraints": [name_constraint(n) for n in names]}


def name_constraint(name: str) -> str:
    """The fleet CA's permitted subtree for one of the gateway's names: the DNS name (and the
    names under it: RFC 5280, 4.2.1.10), or the one address (a /32 or /128 network)."""
    if is_ip(name):
        address = ipaddress.ip_address(name)
        return "IP:%s/%d" % (address, address.max_prefixlen)
    return "DNS:" + name


def unique(items: list) -> list:
    return list(dict.fromkeys(items))
