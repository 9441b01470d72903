"""Ask a Hugging Face hub (or a fleet mirror) about a model revision, with the standard
library only, so the answer is known before anything is installed on the host.

API (huggingface_hub's own calls): ``GET {endpoint}/api/models/{repo}/revision/{rev}``
gives the commit ``sha``; ``GET {endpoint}/api/models/{repo}/tree/{sha}?recursive=true``
(``HfApi.list_repo_tree``, pages linked by ``Link: <...>; rel="next"``) lists what that
commit holds: each file's git blob id (``oid``) and, for an LFS file, the sha256 and size
its pointer names (``lfs``).  Those are the hashes the download is checked against: they
come from the commit's own tree, not from whoever serves the file.  ``HEAD
{endpoint}/{repo}/resolve/{sha}/{file}`` then says what the endpoint would serve (its
``X-Linked-Etag``/``ETag``: the sha256 of an LFS file's content, otherwise the git blob
id); a file served with another hash than its revision lists is refused before anything
is downloaded.
"""
from __future__ import annotations

import fnmatch
import json
import re
import urllib.error
import urllib.parse
import urllib.request

SHA_RE = re.compile(r"^[0-9a-f]{40}$")
# A file's hash as the Hub gives it: a git blob sha1, or an LFS file's sha256.
HASH_RE = re.compile(r"^([0-9a-f]{40}|[0-9a-f]{64})$")
# The options hf_revision and hf_snapshot share (documented by the hf_hub doc fragment).
HUB_ARGUMENT_SPEC = {
    "repo": {"type": "str", "required": True},
    "endpoint": {"type": "str", "default": ""},
    "token": {"type": "str", "default": "", "no_log": True},
    "allow_patterns": {"type": "list", "elements": "str", "default": []},
}
DEFAULT_ENDPOINT = "https://huggingface.co"


class ModelError(Exception):
    """A problem with one of the role's variables; str() names it."""

    def __init__(self, variable: str, message: str):
        super().__init__("%s: %s" % (variable, message))
        self.variable = variable


class Unreachable(ModelError):
    """The hub or mirror did not answer at all (as opposed to answering no)."""


def check_revision_format(revision: str, allow_floating: bool) -> None:
    if not revision:
        raise ModelError("vllm_fleet_model_revision", "is empty; pin a 40-hex commit sha")
    if not SHA_RE.match(revision) and not allow_floating:
        raise ModelError("vllm_fleet_model_revision", (
            "%r is a branch, tag or short sha, so what the fleet serves could change under it; "
            "pin the full 40-hex commit sha, or set vllm_fleet_model_allow_floating_revision: true to "
            "resolve it to a sha now" % revision))


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Keep the first answer: the hub puts X-Linked-Etag/X-Linked-Size of LFS files on
    the 302 to its CDN, not on the CDN's answer."""

    def redirect_request(self, *args, **kwargs):
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)
# A file's content may be behind a redirect (the hub's CDN): follow it.
_FOLLOWING = urllib.request.build_opener()


def _request(url: str, token: str, method: str = "GET", opener=_OPENER):
    request = urllib.request.Request(url, method=method)
    request.add_header("User-Agent", "vllm-fleet")
    if token:
        request.add_header("Authorization", "Bearer %s" % token)
    return opener.open(request, timeout=30)


def _fail(exc, endpoint: str, repo: str, revision: str) -> ModelError:
    where = "%s@%s at %s" % (repo, revision, endpoint)
    if isinstance(exc, urllib.error.HTTPError):
        code, reason = exc.code, exc.headers.get("X-Error-Code", "") or exc.reason
        if code in (401, 403) and "RepoNotFound" in reason:  # the Hub's answer for a repository it does not show
            return ModelError("vllm_fleet_model_repo", "%s was not found at %s (%d %s), or the token may not see it"
                              % (repo, endpoint, code, reason))
        if code in (401, 403) and "RevisionNotFound" not in reason:
            return ModelError("vllm_fleet_model_token", "the hub refused access to %s (%d %s): the token is "
                              "missing, wrong or lacks access to this repository" % (where, code, reason))
        if code == 404 and "RevisionNotFound" in reason:
            return ModelError("vllm_fleet_model_revision", "%s does not exist in %s (%d)" % (revision, repo, code))
        if code == 404:
            return ModelError("vllm_fleet_model_repo", "%s was not found at %s (%d %s)" % (repo, endpoint, code, reason))
        return ModelError("vllm_fleet_model_revision", "the hub could not serve %s (%d %s); check that the "
                          "revision exists in the repository" % (where, code, reason))
    return Unreachable("vllm_fleet_model_endpoint", "cannot read %s: %s" % (where, getattr(exc, "reason", exc)))


def revision_info(endpoint: str, repo: str, revision: str, token: str = "",
                  allow_patterns: list | None = None) -> dict:
    """``{"sha", "files": [{"name", "size", "hash"}], "bytes"}`` or ModelError."""
    endpoint = (endpoint or DEFAULT_ENDPOINT).rstrip("/")
    quoted = urllib.parse.quote(revision, safe="")
    try:
        with _request("%s/api/models/%s/revision/%s" % (endpoint, repo, quoted), token) as answer:
            info = json.load(answer)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise _fail(exc, endpoint, repo, revision) from None
    sha = info.get("sha") or ""
    if not SHA_RE.match(sha):
        raise ModelError("vllm_fleet_model_revision", "the hub gave no commit sha for %s@%s" % (repo, revision))
    # A pin names one commit: an answer for another is refused, whoever gave it (a mirror
    # out of step, anyone on the path of plain HTTP), before a file is fetched.
    if SHA_RE.match(revision) and sha.lower() != revision.lower():
        raise ModelError("vllm_fleet_model_revision", "%s at %s answered the pinned revision %s with the commit %s; "
                         "the fleet serves the pin or nothing" % (repo, endpoint, revision, sha))
    listed = [entry for entry in _tree(endpoint, repo, sha, token)
              if not allow_patterns or any(fnmatch.fnmatch(entry["name"], p) for p in allow_patterns)]
    if not listed:
        raise ModelError("vllm_model_allow_patterns", "no file of %s@%s matches %s"
                         % (repo, sha, allow_patterns))
    for entry in listed:
        served = _served_hash(endpoint, repo, sha, entry["name"], token)
        if served and served != entry["hash"]:
            raise ModelError("vllm_fleet_model_revision", "%s at %s serves %s of %s@%s with the hash %s, but the "
                             "revision lists %s; nothing was downloaded" % (repo, endpoint, entry["name"], repo,
                                                                           sha, served, entry["hash"]))
    return {"sha": sha, "files": listed, "bytes": sum(f["size"] for f in listed)}


def _tree(endpoint: str, repo: str, sha: str, token: str) -> list:
    """The files of commit ``sha``: ``[{"name", "size", "hash"}]``, ``hash`` being the LFS
    sha256 of an LFS file and the git blob id of any other."""
    url, files = "%s/api/models/%s/tree/%s?recursive=true" % (endpoint, repo, sha), []
    while url:
        try:
            with _request(url, token, opener=_FOLLOWING) as answer:  # olah adds a slash (307)
                entries = json.load(answer)
                url = _next_page(answer.geturl(), answer.headers.get("Link", ""))
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise _fail(exc, endpoint, repo, sha) from None
        for entry in entries:
            if entry.get("type") != "file":
                continue
            lfs = entry.get("lfs") or {}
            digest = str(lfs.get("oid") or entry.get("oid") or "").lower()
            if not HASH_RE.match(digest):
                raise ModelError("vllm_fleet_model_revision", "the tree of %s@%s at %s gives %s no hash to check it "
                                 "against" % (repo, sha, endpoint, entry.get("path")))
            files.append({"name": entry["path"], "size": int(lfs.get("size", entry.get("size", 0))), "hash": digest})
    return files


def _next_page(url: str, link: str) -> str:
    """The ``rel="next"`` address of a ``Link`` header (the Hub's pagination) read at
    ``url``, or ''."""
    found = re.search(r'<([^>]+)>\s*;\s*rel="next"', link)
    return urllib.parse.urljoin(url, found.group(1)) if found else ""


def _served_hash(endpoint: str, repo: str, sha: str, name: str, token: str) -> str:
    """The hash the endpoint gives for what it would serve of ``name`` ('' when none)."""
    url = "%s/%s/resolve/%s/%s" % (endpoint, repo, sha, urllib.parse.quote(name))
    try:
        with _request(url, token, "HEAD") as answer:
            headers = answer.headers
    except urllib.error.HTTPError as exc:
        if exc.code not in (301, 302, 303, 307, 308):
            raise _fail(exc, endpoint, repo, sha) from None
        headers = exc.headers
    except (urllib.error.URLError, OSError) as exc:
        raise _fail(exc, endpoint, repo, sha) from None
    etag = (headers.get("X-Linked-Etag") or headers.get("ETag") or "").replace("W/", "").strip('"').lower()
    return etag if HASH_RE.match(etag) else ""


def model_files(endpoint: str, repo: str, revision: str, token: str = "") -> dict:
    """What the planner needs of a revision: ``{"sha", "config", "weight_bytes"}``.

    ``config`` is the revision's own config.json; ``weight_bytes`` the sum of its
    ``*.safetensors`` sizes (0 when it has none).  Unreachable when the hub does not
    answer, ModelError for an answer that is a refusal.
    """
    try:
        info = revision_info(endpoint, repo, revision, token, ["config.json", "*.safetensors"])
    except ModelError as exc:  # neither file: not a model this planner can read
        if exc.variable != "vllm_model_allow_patterns":
            raise
        info = {"sha": revision, "files": []}
    if not any(f["name"] == "config.json" for f in info["files"]):
        raise ModelError("vllm_fleet_model_repo", "%s@%s has no config.json" % (repo, info["sha"]))
    endpoint = (endpoint or DEFAULT_ENDPOINT).rstrip("/")
    url = "%s/%s/resolve/%s/config.json" % (endpoint, repo, info["sha"])
    try:
        with _request(url, token, opener=_FOLLOWING) as answer:
            config = json.load(answer)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise _fail(exc, endpoint, repo, info["sha"]) from None
    weights = sum(f["size"] for f in info["files"] if f["name"].endswith(".safetensors"))
    return {"sha": info["sha"], "config": config, "weight_bytes": weights}
