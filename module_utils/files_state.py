"""Whether the files and units a role's change path sets are already in place, read once.

Plain Python, no Ansible imports; ``library/files_check.py`` wraps it.  A role's change
path (templates, folders, a unit started and enabled) costs one task result per step even
where nothing differs: each result is a round trip, a fork and a callback on the control
node.  ``drift()`` compares what those steps would set (the rendered contents, owners,
groups, modes; the units' states) with the host in one call and lists each difference in
words; a role skips its change path when the list is empty.  Contents are compared whole
(the template module compares checksums of the same bytes).
"""
from __future__ import annotations

import grp
import os
import pwd
import stat


def _owner_problems(path: str, info: os.stat_result, want: dict) -> list:
    problems = []
    if want.get("mode") is not None and stat.S_IMODE(info.st_mode) != int(want["mode"], 8):
        problems.append("%s has mode %04o, not %s" % (path, stat.S_IMODE(info.st_mode), want["mode"]))
    for key, lookup, have in (("owner", pwd.getpwnam, info.st_uid), ("group", grp.getgrnam, info.st_gid)):
        if want.get(key) is None:
            continue
        try:
            wanted = lookup(want[key])[2]
        except KeyError:
            problems.append("%s: the %s %s does not exist" % (path, key, want[key]))
            continue
        if have != wanted:
            problems.append("%s is not owned by %s %s" % (path, key, want[key]))
    return problems


def file_problems(want: dict) -> list:
    """One file (``content``) or folder (``state: directory``) against what it should be."""
    path = want["path"]
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return ["%s is missing" % path]
    if want.get("state") == "directory":
        if not stat.S_ISDIR(info.st_mode):
            return ["%s is not a folder" % path]
    else:
        if not stat.S_ISREG(info.st_mode):
            return ["%s is not a regular file" % path]
        with open(path, "rb") as handle:
            if handle.read() != want["content"].encode():
                return ["%s differs from what the role writes" % path]
    return _owner_problems(path, info, want)


def unit_problems(name: str, active: str, enabled: str) -> list:
    """A unit's ``systemctl is-active`` and ``is-enabled`` answers against ``active`` and
    ``enabled``."""
    problems = []
    if active != "active":
        problems.append("%s is %s, not active" % (name, active or "unknown"))
    if enabled != "enabled":
        problems.append("%s is %s at boot, not enabled" % (name, enabled or "unknown"))
    return problems


def drift(files: list, commands: list, units: list, systemctl, absent: list = ()) -> list:
    """Every difference, in words: the ``commands`` that are not installed, the ``absent``
    paths that exist, the ``files`` not as wanted, the ``units`` not active and enabled
    (``systemctl(verb, unit)`` answers ``is-active`` / ``is-enabled``)."""
    problems = ["%s is not installed" % path for path in commands if not os.access(path, os.X_OK)]
    problems += ["%s is still there" % path for path in absent if os.path.lexists(path)]
    for want in files:
        problems += file_problems(want)
    for name in units:
        problems += unit_problems(name, systemctl("is-active", name), systemctl("is-enabled", name))
    return problems
