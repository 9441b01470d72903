"""hf_mirror's proxy mode: olah, configured by the role's own template, in front of an
upstream hub, fetches each file upstream once however many hosts download it.

The upstream is tools/hub_standin.py -- a labelled stand-in for the Hugging Face Hub's
HTTP interface, since no real hub is reachable from these machines."""
from __future__ import annotations

import json
import sys
import threading
import urllib.request
from pathlib import Path

import huggingface_hub
import pytest
from ansible.module_utils.hf_hub_check import ModelError, revision_info
from ansible.module_utils.hf_snapshot import fetch, layout

from olah_helpers import REPO, ROOT, TINY, free_port, publish_git, start_olah

sys.path.insert(0, str(ROOT / "tools"))
import hub_standin  # noqa: E402

OTHER = "someone/else"  # on the hub, not among the repositories the mirror may serve


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    base = tmp_path_factory.mktemp("proxy")
    sha = publish_git(TINY, base / "hub" / REPO)
    publish_git(TINY, base / "hub" / OTHER)
    hub_port = free_port()
    hub = hub_standin.serve(base / "hub", "127.0.0.1", hub_port)
    threading.Thread(target=hub.serve_forever, daemon=True).start()
    (base / "olah").mkdir()
    server, endpoint = start_olah(base / "olah", "proxy", upstream=f"127.0.0.1:{hub_port}", repos=(REPO,))
    yield {"endpoint": endpoint, "sha": sha, "upstream": f"http://127.0.0.1:{hub_port}"}
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


def test_the_proxy_serves_only_the_repositories_it_is_given(proxy):
    """Not an open proxy to the hub: another repository is answered "not found" and
    nothing of it is fetched upstream."""
    before = upstream_bytes(proxy)
    with pytest.raises(ModelError, match=r"^vllm_fleet_model_repo: someone/else was not found at "):
        revision_info(proxy["endpoint"], OTHER, "main")
    assert upstream_bytes(proxy) == before
