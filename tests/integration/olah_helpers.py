"""A real olah mirror on loopback, configured by hf_mirror's own template, for the
model-delivery tests."""
from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import jinja2

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))  # the Hub stand-in's LFS layout
import hub_standin  # noqa: E402  (tests use it through this module)

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "fixtures" / "models" / "tiny-gemma4"
REPO = "demo/tiny-gemma4"
GIT_IDENTITY = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
                "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
                "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}


def publish_git(src: Path, repo: Path, lfs: tuple = ()) -> str:
    """Copy ``src`` into a new git repository at ``repo``, the files named in ``lfs`` as
    git LFS files (a pointer committed, the content in git-lfs's object store, as the Hub
    and olah's offline mirror keep them); return the commit sha."""
    shutil.copytree(src, repo)
    env = dict(os.environ, **GIT_IDENTITY)
    subprocess.run(["git", "-C", str(repo), "init", "-q", "-b", "main"], check=True, env=env)
    for name in lfs:
        data = (repo / name).read_bytes()
        oid = hashlib.sha256(data).hexdigest()
        hub_standin.lfs_object(repo, oid).parent.mkdir(parents=True, exist_ok=True)
        hub_standin.lfs_object(repo, oid).write_bytes(data)
        (repo / name).write_bytes(hub_standin.lfs_pointer(oid, len(data)))
    for argv in (["add", "-A"], ["commit", "-qm", "publish"]):
        subprocess.run(["git", "-C", str(repo), *argv], check=True, env=env)
    return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True, text=True,
                          capture_output=True).stdout.strip()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_olah(root: Path, mode: str, upstream: str = "", repos: tuple = ()) -> tuple[subprocess.Popen, str]:
    """Run olah with the role's olah.toml.j2 (repos under ``root/mirrors``); return the
    process and its endpoint once it listens.  ``upstream``: host:port of the hub (proxy);
    ``repos``: the repositories it may proxy (hf_mirror_proxy_repos); those held under
    ``root/mirrors/models`` it may serve, as the role writes them."""
    held = ["%s/%s" % (repo.parent.name, repo.name) for repo in sorted((root / "mirrors" / "models").glob("*/*"))]
    port = free_port()
    template = (ROOT / "roles" / "hf_mirror" / "templates" / "olah.toml.j2").read_text()
    config = root / "olah.toml"
    config.write_text(jinja2.Template(template).render(
        ansible_managed="test", hf_mirror_mode=mode, hf_mirror_backend_port=port,
        hf_mirror_netloc=f"127.0.0.1:{port}", hf_mirror_root=str(root),
        hf_mirror_upstream_scheme="http", hf_mirror_upstream_netloc=upstream,
        hf_mirror_upstream_lfs_netloc=upstream, _hf_mirror_repos=held, hf_mirror_proxy_repos=list(repos)))
    server = subprocess.Popen([str(Path(sys.executable).with_name("olah-cli")), "-c", str(config)],
                              cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(60):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return server, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.5)
    server.kill()
    raise TimeoutError("olah did not listen on %d" % port)
