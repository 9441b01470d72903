"""Ask a vLLM OpenAI-compatible server whether it serves: /health, /v1/models and
one real chat completion whose answer must have the OpenAI shape.

Standard library only: the service role also installs this file on the host and
runs it as the unit's ``ExecStartPost`` (``python vllm_probe.py URL TIMEOUT``), so
that systemd reports the instance active only once ``/health`` answers 200.
"""
from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request


class ProbeError(Exception):
    pass


def request(url: str, *, api_key: str = "", body: dict | None = None, timeout: float = 30,
            opener=urllib.request.urlopen) -> tuple[int, dict | str]:
    """One HTTP request; returns (status, parsed JSON or text).  Never raises on HTTP errors."""
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = "Bearer " + api_key
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers=headers)
    try:
        with opener(req, timeout=timeout) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    text = raw.decode("utf-8", "replace")
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


def wait_healthy(base: str, timeout: float, *, interval: float = 2.0, opener=urllib.request.urlopen,
                 clock=None, sleep=None, alive=lambda: True) -> float:
    """Poll ``base``/health until it answers 200; returns the seconds it took.

    ``alive()`` false (the server process is gone) stops the wait at once.
    """
    clock, sleep = clock or time.monotonic, sleep or time.sleep
    started = clock()
    last = "no answer yet"
    while True:
        if not alive():
            raise ProbeError("the server process exited before %s/health answered 200" % base)
        try:
            status, _body = request(base + "/health", timeout=5, opener=opener)
            if status == 200:
                return clock() - started
            last = "HTTP %d" % status
        except (OSError, urllib.error.URLError) as exc:
            last = str(getattr(exc, "reason", exc))
        if clock() - started >= timeout:
            raise ProbeError("%s/health did not answer 200 within %ds (last: %s)" % (base, timeout, last))
        sleep(interval)


def check_chat(body) -> dict:
    """The parts of a chat completion the fleet relies on; raises ProbeError otherwise."""
    try:
        choice = body["choices"][0]
        content = choice["message"]["content"]
        usage = body["usage"]
        if not isinstance(content, str) or choice.get("finish_reason") not in ("stop", "length"):
            raise TypeError("content %r, finish_reason %r" % (content, choice.get("finish_reason")))
        if int(usage["completion_tokens"]) < 1:
            raise ValueError("no completion tokens")
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise ProbeError("the chat completion does not have the OpenAI shape (%s): %.300s"
                         % (exc, json.dumps(body) if not isinstance(body, str) else body))
    return {"answer": content, "finish_reason": choice["finish_reason"], "usage": usage,
            "model": body.get("model")}


def probe(base: str, api_key: str, model: str, *, prompt: str, max_tokens: int = 16,
          timeout: float = 600, root: str = "", version: str = "",
          opener=urllib.request.urlopen) -> dict:
    """Wait for health, check the model is listed (from ``root``, the model path asked
    for, when given) and the server is vLLM ``version`` (when given), send one chat
    completion."""
    health_seconds = wait_healthy(base, timeout, opener=opener)
    status, models = request(base + "/v1/models", api_key=api_key, opener=opener)
    if status != 200:
        raise ProbeError("%s/v1/models answered HTTP %d: %.300s" % (base, status, models))
    served = [m.get("id") for m in models.get("data", [])]
    if model not in served:
        raise ProbeError("%s serves %s, not %r" % (base, served, model))
    served_root = next(m.get("root") for m in models["data"] if m.get("id") == model)
    if root and served_root != root:
        raise ProbeError("%s serves %s from %s, not from %s" % (base, model, served_root, root))
    served_version = ""
    if version:
        status, body = request(base + "/version", opener=opener)
        served_version = body.get("version", "") if isinstance(body, dict) else ""
        if status != 200 or served_version.split("+")[0] != version:
            raise ProbeError("%s/version is %r (HTTP %d), not vLLM %s" % (base, served_version, status, version))
    started = time.monotonic()
    status, body = request(base + "/v1/chat/completions", api_key=api_key, timeout=timeout,
                           body={"model": model, "max_tokens": max_tokens,
                                 "messages": [{"role": "user", "content": prompt}]},
                           opener=opener)
    if status != 200:
        raise ProbeError("%s/v1/chat/completions answered HTTP %d: %.300s" % (base, status, body))
    chat = check_chat(body)
    chat.update(models=served, root=served_root, version=served_version,
                health_seconds=round(health_seconds, 1),
                chat_seconds=round(time.monotonic() - started, 3))
    return chat


# The gauges of requests an instance holds (vLLM's v1 metrics; one sample per engine).
IN_FLIGHT = ("vllm:num_requests_running", "vllm:num_requests_waiting")


def in_flight(metrics: str) -> dict:
    """Requests running and waiting, summed over the samples of a /metrics text."""
    counts = dict.fromkeys(IN_FLIGHT, 0.0)
    seen = set()
    for line in metrics.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in counts:
            counts[name] += float(line.rsplit(" ", 1)[1])
            seen.add(name)
    missing = [name for name in IN_FLIGHT if name not in seen]
    if missing:
        raise ProbeError("/metrics has no %s (is --disable-log-stats set?)" % " or ".join(missing))
    return {"running": int(counts[IN_FLIGHT[0]]), "waiting": int(counts[IN_FLIGHT[1]])}


def wait_idle(base: str, timeout: float, *, interval: float = 1.0, opener=urllib.request.urlopen,
              clock=None, sleep=None) -> dict:
    """Poll ``base``/metrics until the instance holds no request (running or waiting), up to
    ``timeout`` seconds.  Returns the last counts, the seconds waited and whether it is idle.
    An instance that does not answer at all (stopped, still starting) holds no request."""
    clock, sleep = clock or time.monotonic, sleep or time.sleep
    started = clock()
    while True:
        try:
            status, body = request(base + "/metrics", timeout=10, opener=opener)
        except (OSError, urllib.error.URLError) as exc:
            return {"running": 0, "waiting": 0, "idle": True, "seconds": round(clock() - started, 1),
                    "answered": False, "error": str(getattr(exc, "reason", exc))}
        if status != 200 or not isinstance(body, str):
            raise ProbeError("%s/metrics answered HTTP %d" % (base, status))
        counts = in_flight(body)
        waited = clock() - started
        if counts["running"] + counts["waiting"] == 0 or waited >= timeout:
            return dict(counts, idle=counts["running"] + counts["waiting"] == 0, seconds=round(waited, 1),
                        answered=True)
        sleep(interval)


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


if __name__ == "__main__":
    # ExecStartPost: python vllm_probe.py http://127.0.0.1:8000 TIMEOUT; systemd gives
    # the server's PID in $MAINPID, and systemd does not stop this wait when it dies.
    main_pid = int(os.environ.get("MAINPID") or 0)
    try:
        took = wait_healthy(sys.argv[1], float(sys.argv[2]),
                            alive=lambda: not main_pid or process_alive(main_pid))
    except ProbeError as exc:
        sys.exit(str(exc))
    print("healthy after %.1fs" % took)
