#!/usr/bin/env python3
"""STAND-IN for the Hugging Face Hub's HTTP interface (the real hub is not reachable
from the machines this project is tested on).

It serves git repositories (``ROOT/<org>/<repo>``, as hf_mirror publishes them) with
the parts of the Hub API that huggingface_hub and olah's proxy mode use: repository
and revision info (``?blobs=true``: each sibling's ``blobId``, ``size``, ``lfs``), tree
and paths-info, and ``resolve`` with the Hub's headers (ETag = git blob sha,
X-Repo-Commit, Content-Length, ranges).  Large files are git LFS files as on the Hub:
the commit holds a pointer (``oid sha256:...``, ``size``), the content lies in
``.git/lfs/objects/<2>/<2>/<sha256>`` (git-lfs's layout, which olah's offline mirror
reads too); the tree lists the pointer's ``lfs`` metadata, and ``resolve`` answers a 302
to a separate download host (``--lfs-netloc``; ``/lfs/<sha256>`` there) carrying
``X-Linked-Etag`` (the sha256) and ``X-Linked-Size``, as the Hub's redirect to its CDN
does.  It counts the bytes of file content it sends, so a test or bench can see what a
fleet mirror fetched upstream (``GET /_standin/bytes``).

    python tools/hub_standin.py ROOT --port 8099 [--lfs-netloc HOST:PORT]
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

SHA = re.compile(r"^[0-9a-f]{40}$")
LFS_POINTER = re.compile(rb"^version https://git-lfs\.github\.com/spec/v1\noid sha256:([0-9a-f]{64})\nsize (\d+)\n$")


def lfs_object(repo: Path, oid: str) -> Path:
    """Where git-lfs keeps the content of ``oid`` in ``repo``."""
    return repo / ".git" / "lfs" / "objects" / oid[:2] / oid[2:4] / oid


def lfs_pointer(oid: str, size: int) -> bytes:
    """The pointer file git-lfs commits in place of a file (its spec, v1)."""
    return b"version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n" % (oid.encode(), size)


class Hub:
    def __init__(self, root: Path):
        self.root = root
        self.bytes_sent = 0
        self.lock = threading.Lock()

    def git(self, repo: str, *argv: str) -> bytes | None:
        path = self.root / repo
        if not (path / ".git").is_dir():
            return None
        done = subprocess.run(["git", "-c", "safe.directory=*", "-C", str(path), *argv],
                              capture_output=True)
        return done.stdout if done.returncode == 0 else None

    def resolve(self, repo: str, rev: str) -> str | None:
        out = self.git(repo, "rev-parse", "--verify", "--quiet", rev + "^{commit}")
        return out.decode().strip() if out else None

    def files(self, repo: str, sha: str) -> list[dict]:
        """The commit's files as the Hub's tree lists them: an LFS file with the size and
        sha256 its pointer names (``lfs``), the pointer's own blob as ``oid``."""
        out = self.git(repo, "ls-tree", "-r", "-l", sha) or b""
        files = []
        for line in out.decode().splitlines():
            meta, path = line.split("\t", 1)
            _mode, _kind, oid, size = meta.split()
            entry = {"path": path, "oid": oid, "size": int(size)}
            pointer = LFS_POINTER.match(self.git(repo, "cat-file", "blob", oid) or b"") if int(size) < 200 else None
            if pointer:
                entry["size"] = int(pointer.group(2))
                entry["lfs"] = {"oid": pointer.group(1).decode(), "size": entry["size"], "pointerSize": int(size)}
            files.append(entry)
        return files

    def info(self, repo: str, sha: str, blobs: bool = False) -> dict:
        siblings = []
        for f in self.files(repo, sha):
            sibling = {"rfilename": f["path"]}
            if blobs:
                sibling.update(blobId=f["oid"], size=f["size"])
                if "lfs" in f:
                    sibling["lfs"] = {"sha256": f["lfs"]["oid"], "size": f["size"],
                                      "pointerSize": f["lfs"]["pointerSize"]}
            siblings.append(sibling)
        return {"id": repo, "modelId": repo, "sha": sha, "private": False, "gated": False,
                "disabled": False, "lastModified": "2026-01-01T00:00:00.000Z", "siblings": siblings}

    def lfs_content(self, oid: str) -> bytes | None:
        """The content of LFS object ``oid`` from whichever repository holds it."""
        found = next(iter(sorted(self.root.glob("*/*/.git/lfs/objects/%s/%s/%s" % (oid[:2], oid[2:4], oid)))), None)
        return found.read_bytes() if found else None


def make_handler(hub: Hub, lfs_netloc: str):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet
            pass

        def send(self, status: int, body: bytes = b"", headers: dict | None = None,
                 content_type: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def not_found(self, code: str = "RepoNotFound") -> None:
            self.send(404, json.dumps({"error": code}).encode(), {"X-Error-Code": code})

        def do_HEAD(self):
            self.do_GET()

        def do_POST(self):
            self.do_GET()

        def do_GET(self):
            path = unquote(urlparse(self.path).path)
            if path == "/_standin/bytes":
                return self.send(200, json.dumps({"bytes": hub.bytes_sent}).encode())
            api = re.match(r"^/api/models/([^/]+/[^/]+)(?:/(revision|tree|paths-info)/([^/]+)(?:/(.*))?)?/?$", path)
            if api:
                return self.api(*api.groups())
            resolve = re.match(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$", path)
            if resolve:
                return self.resolve(*resolve.groups())
            lfs = re.match(r"^/lfs/([0-9a-f]{64})$", path)
            if lfs:
                data = hub.lfs_content(lfs.group(1))
                if data is None:
                    return self.not_found("EntryNotFound")
                return self.content(data, {"ETag": '"%s"' % lfs.group(1), "Accept-Ranges": "bytes"})
            return self.not_found("EntryNotFound")

        def asked_paths(self) -> list[str] | None:
            """paths-info: the paths in the POST body (form or JSON)."""
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
            if not body:
                return None
            if self.headers.get("Content-Type", "").startswith("application/json"):
                paths = json.loads(body).get("paths")
            else:
                paths = parse_qs(body).get("paths")
            return [paths] if isinstance(paths, str) else paths

        def api(self, repo, kind, rev, sub):
            asked = self.asked_paths() if kind == "paths-info" else None
            sha = hub.resolve(repo, rev or "HEAD")
            if sha is None:
                return self.not_found("RevisionNotFound" if hub.resolve(repo, "HEAD") else "RepoNotFound")
            headers = {"X-Repo-Commit": sha}
            if kind in ("tree", "paths-info"):
                entries = [dict(f, type="file") for f in hub.files(repo, sha)
                           if (asked is None or f["path"] in asked)
                           and (not sub or f["path"] == sub or f["path"].startswith(sub.rstrip("/") + "/"))]
                return self.send(200, json.dumps(entries).encode(), headers)
            blobs = parse_qs(urlparse(self.path).query).get("blobs", [""])[0].lower() in ("1", "true")
            return self.send(200, json.dumps(hub.info(repo, sha, blobs)).encode(), headers)

        def resolve(self, repo, rev, name):
            sha = hub.resolve(repo, rev)
            entry = next((f for f in hub.files(repo, sha) if f["path"] == name), None) if sha else None
            if entry is None:
                return self.not_found("EntryNotFound" if sha else "RevisionNotFound")
            headers = {"ETag": '"%s"' % entry["oid"], "X-Repo-Commit": sha, "Accept-Ranges": "bytes"}
            if "lfs" in entry:  # the Hub: a redirect to its download host, the content's hash on it
                oid = entry["lfs"]["oid"]
                headers.update({"X-Linked-Etag": '"%s"' % oid, "X-Linked-Size": str(entry["size"]),
                                "Location": "http://%s/lfs/%s" % (lfs_netloc or self.headers.get("Host"), oid)})
                return self.send(302, b"", headers, "text/plain")
            return self.content(hub.git(repo, "cat-file", "blob", entry["oid"]) or b"", headers)

        def content(self, data: bytes, headers: dict) -> None:
            """A file's bytes, or the range asked for; counted."""
            status, body = 200, data
            ranged = re.match(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
            if ranged:
                start = int(ranged.group(1))
                end = int(ranged.group(2)) if ranged.group(2) else len(data) - 1
                body = data[start:end + 1]
                status = 206
                headers["Content-Range"] = "bytes %d-%d/%d" % (start, end, len(data))
            if self.command == "GET":
                with hub.lock:
                    hub.bytes_sent += len(body)
            return self.send(status, body, headers, "application/octet-stream")

    return Handler


def serve(root: Path, host: str, port: int, lfs_netloc: str = "") -> ThreadingHTTPServer:
    """The stand-in on ``host:port``; LFS downloads redirect to ``lfs_netloc`` (another
    stand-in over the same ROOT; by default the host the client asked)."""
    return ThreadingHTTPServer((host, port), make_handler(Hub(root), lfs_netloc))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("root", type=Path)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8099)
    parser.add_argument("--lfs-netloc", default="", help="host:port LFS downloads are redirected to")
    args = parser.parse_args()
    serve(args.root, args.host, args.port, args.lfs_netloc).serve_forever()


if __name__ == "__main__":
    main()
