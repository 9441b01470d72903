"""One host's Prometheus file_sd files on a monitoring host, all of its jobs in one call:
``<folder>/<job>/<host>.json`` written where the host has targets in the job, removed
where it has none (docs/publishing.md).  One call instead of a folder, a copy and a
removal per job, each a round trip to the monitoring host on every run of every host.

A file is written beside its place under a name with a leading dot and moved over it, so
Prometheus, which reads ``[^.]*.json`` as files change, never reads half a file or the
temporary one.  The text is what Ansible's ``to_nice_json`` writes, and a newline: files
written by the tasks this replaced stay as they are.

Plain Python, no Ansible imports; ``library/file_sd_publish.py`` wraps it.
"""
from __future__ import annotations

import json
import os
import re
import stat
import tempfile

# A job's folder and a host's file name: no path separators, no leading dot.
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
FILE_MODE = 0o644
FOLDER_MODE = 0o755


class FileSdError(ValueError):
    """The message starts with the option it is about."""


def render(groups: list) -> str:
    """A job's file: its target groups as ``to_nice_json`` writes them, and a newline."""
    return json.dumps(groups, indent=4, sort_keys=True, separators=(",", ": ")) + "\n"


def _check(host: str, jobs: dict) -> None:
    if not NAME.fullmatch(host or ""):
        raise FileSdError("host: %r cannot name a file (letters, digits, '_', '.', '-')" % (host,))
    for job, groups in jobs.items():
        if not NAME.fullmatch(job):
            raise FileSdError("jobs: %r cannot name a folder (letters, digits, '_', '.', '-')" % (job,))
        if not isinstance(groups, list) or not all(
                isinstance(g, dict) and isinstance(g.get("targets"), list) for g in groups):
            raise FileSdError("jobs.%s: not a list of target groups, each with a list of targets" % job)


def _read(path: str):
    """The file's text and its stat, or (None, None) where there is no file."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read(), os.fstat(handle.fileno())
    except (FileNotFoundError, NotADirectoryError):
        return None, None


def _owned(found: os.stat_result, mode: int, uid: int, gid: int) -> bool:
    return stat.S_IMODE(found.st_mode) == mode and found.st_uid == uid and found.st_gid == gid


def _write(path: str, text: str, uid: int, gid: int) -> None:
    folder, name = os.path.split(path)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix="." + name + ".", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fchmod(out.fileno(), FILE_MODE)
            os.fchown(out.fileno(), uid, gid)
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def _folder(path: str, uid: int, gid: int, check: bool) -> bool:
    """Make the job's folder or set its mode and owner; whether that changed anything."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        found = None
    if found is not None:
        if not stat.S_ISDIR(found.st_mode):
            raise FileSdError("folder: %s is there and not a folder" % path)
        if _owned(found, FOLDER_MODE, uid, gid):
            return False
    if not check:
        if found is None:
            os.makedirs(path, FOLDER_MODE, exist_ok=True)
        os.chmod(path, FOLDER_MODE)
        os.chown(path, uid, gid)
    return True


def publish(folder: str, host: str, jobs: dict, uid: int = 0, gid: int = 0, check: bool = False) -> dict:
    """Write ``<folder>/<job>/<host>.json`` for each job with target groups, remove it for
    each job without.  ``check``: change nothing, say what would change.  Returns
    ``changed``, ``written`` and ``removed`` (paths) and ``diff`` (one entry per changed file)."""
    _check(host, jobs)
    written, removed, diff, changed = [], [], [], False
    for job in sorted(jobs):
        path = os.path.join(folder, job, host + ".json")
        if not jobs[job]:
            before, _ = _read(path)
            if before is not None or os.path.lexists(path):
                if not check:
                    os.unlink(path)
                removed.append(path)
                diff.append({"before_header": path, "after_header": path, "before": before or "", "after": ""})
            continue
        changed = _folder(os.path.join(folder, job), uid, gid, check) or changed
        before, found = _read(path)
        text = render(jobs[job])
        if before == text and _owned(found, FILE_MODE, uid, gid):
            continue
        if not check:
            _write(path, text, uid, gid)
        written.append(path)
        diff.append({"before_header": path, "after_header": path, "before": before or "", "after": text})
    return {"changed": changed or bool(written or removed), "written": written, "removed": removed, "diff": diff}
