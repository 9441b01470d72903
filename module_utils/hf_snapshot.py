"""Download a pinned model revision into <root>/<org>/<repo>/<sha>, verified, and
point <root>/<org>/<repo>/current at it -- never at a half-written snapshot.

The download goes to ``<sha>.partial`` with huggingface_hub's ``snapshot_download``
(an interrupted run resumes there), every file is checked against the size and hash the
pinned commit's tree lists (sha256 for LFS files, the git blob sha1 otherwise), the tokenizer must
load as a fast tokenizer, and only then is the folder renamed and the link switched
(rename and link replacement are atomic on one file system).
"""
from __future__ import annotations

import hashlib
import os
import shutil

from ansible.module_utils.hf_hub_check import ModelError

MARKER = ".vllm-fleet-verified"


def layout(root: str, repo: str, sha: str) -> dict:
    base = os.path.join(root, *repo.split("/"))
    return {"base": base, "target": os.path.join(base, sha),
            "staging": os.path.join(base, sha + ".partial"), "current": os.path.join(base, "current")}


def file_digest(path: str, expected: str) -> str:
    """The file's hash in the expected hash's kind: sha256 (64 hex) or git blob sha1 (40 hex)."""
    if len(expected) == 64:
        digest = hashlib.sha256()
    else:
        digest = hashlib.sha1()
        digest.update(b"blob %d\0" % os.path.getsize(path))
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def bad_files(folder: str, files: list) -> list:
    """Names of the files that are missing or differ from the revision's size/hash."""
    bad = []
    for entry in files:
        path = os.path.join(folder, entry["name"])
        if not os.path.isfile(path):
            bad.append(entry["name"])
        elif entry.get("size") is not None and os.path.getsize(path) != entry["size"]:
            bad.append(entry["name"])
        elif file_digest(path, entry["hash"]) != entry["hash"]:
            bad.append(entry["name"])
    return bad


def tokenizer_problem(folder: str) -> str | None:
    """vLLM needs a fast (Rust) tokenizer: tokenizer.json must load with `tokenizers`."""
    path = os.path.join(folder, "tokenizer.json")
    if not os.path.isfile(path):
        return "no tokenizer.json: vLLM needs a fast tokenizer"
    try:
        from tokenizers import Tokenizer
        Tokenizer.from_file(path)
    except Exception as exc:  # any load failure is the answer
        return "tokenizer.json does not load as a fast tokenizer: %s" % exc
    return None


def is_current(paths: dict, sha: str) -> bool:
    return os.path.islink(paths["current"]) and os.readlink(paths["current"]) == sha


def point_current(paths: dict, sha: str) -> bool:
    """Atomically make current -> <sha>; True when it changed."""
    if is_current(paths, sha):
        return False
    temporary = paths["current"] + ".new"
    if os.path.lexists(temporary):
        os.unlink(temporary)
    os.symlink(sha, temporary)
    os.replace(temporary, paths["current"])
    return True


def fetch(hub, repo: str, info: dict, root: str, endpoint: str, token: str,
          allow_patterns: list, check_mode: bool) -> dict:
    """``hub`` is the huggingface_hub module.  ``info`` is hf_hub_check.revision_info()."""
    sha, files = info["sha"], info["files"]
    paths = layout(root, repo, sha)
    result = {"path": paths["target"], "current": paths["current"], "revision": sha,
              "files": len(files), "bytes": info["bytes"], "downloaded": False}
    if os.path.isfile(os.path.join(paths["target"], MARKER)):
        changed = not is_current(paths, sha) if check_mode else point_current(paths, sha)
        return dict(result, changed=changed)
    if check_mode:
        return dict(result, changed=True)
    os.makedirs(paths["base"], exist_ok=True)
    free = shutil.disk_usage(paths["base"]).free
    have = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(paths["staging"]) for f in fs)
    if free + have < info["bytes"]:
        raise ModelError("vllm_fleet_model_root", "%s has %.1f GiB free; %s@%s needs %.1f GiB"
                         % (root, free / 2**30, repo, sha, info["bytes"] / 2**30))
    kwargs = dict(repo_id=repo, revision=sha, local_dir=paths["staging"],
                  endpoint=endpoint or None, token=token or None,
                  allow_patterns=allow_patterns or None)
    hub.snapshot_download(**kwargs)
    for name in bad_files(paths["staging"], files):  # torn by an interrupted run: fetch it again
        hub.hf_hub_download(repo_id=repo, filename=name, revision=sha, local_dir=paths["staging"],
                            endpoint=endpoint or None, token=token or None, force_download=True)
    bad = bad_files(paths["staging"], files)
    if bad:
        raise ModelError("vllm_fleet_model_revision", "%s@%s: %s differ from the sizes and hashes the revision "
                         "lists, after a second download; nothing was switched" % (repo, sha, ", ".join(bad)))
    problem = tokenizer_problem(paths["staging"])
    if problem:
        raise ModelError("vllm_fleet_model_repo", "%s@%s: %s" % (repo, sha, problem))
    shutil.rmtree(os.path.join(paths["staging"], ".cache"), ignore_errors=True)
    with open(os.path.join(paths["staging"], MARKER), "w") as handle:
        handle.write("%s@%s %d files %d bytes\n" % (repo, sha, len(files), info["bytes"]))
    os.rename(paths["staging"], paths["target"])
    point_current(paths, sha)
    return dict(result, changed=True, downloaded=True)
