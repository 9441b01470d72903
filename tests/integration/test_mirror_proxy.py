"""hf_mirror's proxy mode: olah, configured by the role's own template, in front of an
upstream hub, fetches each file upstream once however many hosts download it.

The upstream is tools/hub_standin.py -- a labelled stand-in for the Hugging Face Hub's
HTTP interface, since no real hub is reachable from these machines."""
from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import huggingface_hub
import jinja2
import pytest
from ansible.module_utils.hf_hub_check import revision_info
from ansible.module_utils.hf_snapshot import fetch, layout

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import hub_standin  # noqa: E402

TINY = ROOT / "tests" / "fixtures" / "models" / "tiny-gemma4"
REPO = "demo/tiny-gemma4"
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_port(port: int) -> None:
    for _ in range(60):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(port)


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    base = tmp_path_factory.mktemp("proxy")
    repo = base / "hub" / REPO
    shutil.copytree(TINY, repo)
    for argv in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "tiny"]):
        subprocess.run(["git", "-C", str(repo), *argv], check=True, env=GIT_ENV | {"PATH": "/usr/bin:/bin"})
    sha = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True, text=True,
                         capture_output=True).stdout.strip()
    hub_port, mirror_port = free_port(), free_port()
    hub = hub_standin.serve(base / "hub", "127.0.0.1", hub_port)
    threading.Thread(target=hub.serve_forever, daemon=True).start()
    template = (ROOT / "roles" / "hf_mirror" / "templates" / "olah.toml.j2").read_text()
    (base / "olah.toml").write_text(jinja2.Template(template).render(
        ansible_managed="test", hf_mirror_listen="127.0.0.1", hf_mirror_port=mirror_port,
        hf_mirror_netloc=f"127.0.0.1:{mirror_port}", hf_mirror_root=str(base / "olah"),
        hf_mirror_upstream_scheme="http", hf_mirror_upstream_netloc=f"127.0.0.1:{hub_port}",
        hf_mirror_upstream_lfs_netloc=f"127.0.0.1:{hub_port}", hf_mirror_mode="proxy"))
    server = subprocess.Popen([str(Path(sys.executable).with_name("olah-cli")), "-c", "olah.toml"],
                              cwd=base, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(mirror_port)
    yield {"endpoint": f"http://127.0.0.1:{mirror_port}", "sha": sha, "hub": hub,
           "upstream": f"http://127.0.0.1:{hub_port}"}
    server.terminate()
    server.wait(timeout=10)
    hub.shutdown()


def upstream_bytes(proxy) -> int:
    with urllib.request.urlopen(proxy["upstream"] + "/_standin/bytes") as answer:
        return json.load(answer)["bytes"]


def test_hosts_through_the_proxy_fetch_the_model_upstream_once(proxy, tmp_path):
    model_bytes = sum(p.stat().st_size for p in TINY.iterdir())
    info = revision_info(proxy["endpoint"], REPO, proxy["sha"])
    assert info["bytes"] == model_bytes
    for host in ("node1", "node2", "node3"):
        result = fetch(huggingface_hub, REPO, info, str(tmp_path / host), proxy["endpoint"], "", [], False)
        assert result["downloaded"]
        target = Path(layout(str(tmp_path / host), REPO, proxy["sha"])["target"])
        assert (target / "model.safetensors").read_bytes() == (TINY / "model.safetensors").read_bytes()
    assert upstream_bytes(proxy) == model_bytes
