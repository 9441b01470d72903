"""The hub's answer for a revision (module_utils/hf_hub_check.py) against a stand-in hub
that answers as told: a pin answered with another commit is refused before any file is
asked for."""
from __future__ import annotations

import http.server
import json
import threading

import pytest
from ansible.module_utils.hf_hub_check import ModelError, model_files, revision_info

PIN, OTHER = "1" * 40, "2" * 40


class Hub(http.server.BaseHTTPRequestHandler):
    """Answers every revision with ``sha`` and one file; counts the file requests."""
    sha, heads = PIN, []

    def do_GET(self):  # noqa: N802 (http.server's name)
        body = json.dumps({"sha": Hub.sha, "siblings": [{"rfilename": "config.json"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_HEAD(self):  # noqa: N802
        Hub.heads.append(self.path)
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.send_header("ETag", '"abc"')
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture()
def hub():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    Hub.heads = []
    yield "http://127.0.0.1:%d" % server.server_address[1]
    server.shutdown()


def test_the_pin_answered_with_its_own_commit_is_listed(hub):
    Hub.sha = PIN
    assert revision_info(hub, "demo/model", PIN)["files"] == [{"name": "config.json", "size": 2, "etag": "abc"}]


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
