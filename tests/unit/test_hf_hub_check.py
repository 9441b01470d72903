"""The hub's answer for a revision (module_utils/hf_hub_check.py) against a stand-in hub
that answers as told: a pin answered with another commit is refused before any file is
asked for; the files' hashes are the commit tree's, its pages followed; a file the hub
would serve with another hash is refused by name."""
from __future__ import annotations

import http.server
import json
import threading

import pytest
from ansible.module_utils.hf_hub_check import ModelError, model_files, revision_info

PIN, OTHER = "1" * 40, "2" * 40


CONFIG_BLOB, WEIGHTS_SHA256 = "a" * 40, "b" * 64


class Hub(http.server.BaseHTTPRequestHandler):
    """Answers every revision with ``sha``; its tree in two pages (config.json, then an LFS
    weights file); HEAD with ``served`` hashes; counts the HEADs."""
    sha, heads, served = PIN, [], {}

    def do_GET(self):  # noqa: N802 (http.server's name)
        link = {}
        if "/tree/" in self.path and "cursor=2" in self.path:
            body = [{"type": "file", "path": "model.safetensors", "oid": "c" * 40, "size": 7,
                     "lfs": {"oid": WEIGHTS_SHA256, "size": 5000, "pointerSize": 134}}]
        elif "/tree/" in self.path:
            body = [{"type": "directory", "path": "docs", "oid": "d" * 40, "size": 0},
                    {"type": "file", "path": "config.json", "oid": CONFIG_BLOB, "size": 2}]
            link = {"Link": "<%s?recursive=true&cursor=2>; rel=\"next\"" % self.path.split("?")[0]}
        else:
            body = {"sha": Hub.sha, "siblings": [{"rfilename": "config.json"}]}
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        for key, value in link.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def do_HEAD(self):  # noqa: N802
        Hub.heads.append(self.path)
        name = self.path.rsplit("/", 1)[-1]
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.send_header("X-Linked-Etag" if name.endswith(".safetensors") else "ETag",
                         '"%s"' % Hub.served.get(name, WEIGHTS_SHA256 if name.endswith(".safetensors") else CONFIG_BLOB))
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture()
def hub():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    Hub.heads, Hub.served = [], {}
    yield "http://127.0.0.1:%d" % server.server_address[1]
    server.shutdown()


def test_the_pin_answered_with_its_own_commit_lists_its_trees_hashes(hub):
    Hub.sha = PIN
    info = revision_info(hub, "demo/model", PIN)
    assert info["files"] == [{"name": "config.json", "size": 2, "hash": CONFIG_BLOB},
                             {"name": "model.safetensors", "size": 5000, "hash": WEIGHTS_SHA256}]
    assert info["bytes"] == 5002 and len(Hub.heads) == 2


def test_a_file_served_with_another_hash_is_refused_by_name(hub):
    Hub.sha, Hub.served = PIN, {"model.safetensors": "e" * 64}
    with pytest.raises(ModelError) as refused:
        revision_info(hub, "demo/model", PIN)
    assert str(refused.value) == (
        "vllm_fleet_model_revision: demo/model at %s serves model.safetensors of demo/model@%s with the hash %s, but "
        "the revision lists %s; nothing was downloaded" % (hub, PIN, "e" * 64, WEIGHTS_SHA256))


@pytest.mark.parametrize("read", [revision_info, model_files])
def test_a_pin_answered_with_another_commit_is_refused_before_any_file(hub, read):
    Hub.sha = OTHER
    with pytest.raises(ModelError) as refused:
        read(hub, "demo/model", PIN)
    assert str(refused.value) == (
        "vllm_fleet_model_revision: demo/model at %s answered the pinned revision %s with the commit %s; the fleet "
        "serves the pin or nothing" % (hub, PIN, OTHER))
    assert Hub.heads == []


def test_a_floating_revision_takes_the_commit_it_resolves_to(hub):
    Hub.sha = OTHER
    assert revision_info(hub, "demo/model", "main")["sha"] == OTHER
