"""A bounded client load through the gateway, with the official openai client: several
clients, half of them streaming, each sending requests one after the other (together at
most ``rate`` a second, under the client key's limit) until told to stop or its count is
reached.  Every request is counted: ok, or failed with why.  A
stream counts as ok only when it ends with a finish_reason (a cut stream ends without).

The clients keep their connections alive, as real ones do.  A reload of nginx (a host
leaving or joining the rotation) closes its idle keep-alive connections, and a request
written onto one at that instant gets no answer at all: the client sees the connection
closed.  The official openai client retries exactly that (``APIConnectionError``, its
``max_retries``); so does this load, once, and counts it apart (``reconnected``) from
what the gateway answered.  A timeout or any answer from the gateway (a 5xx included)
is never retried here (docs/gateway.md, "Reloads").

    python fleet_load.py https://GATEWAY CA_FILE KEY MODEL SECONDS   # a load of its own
"""
from __future__ import annotations

import collections
import concurrent.futures
import sys
import threading
import time

import httpx
import openai

CHAT = [{"role": "user", "content": "Tell the fleet operator a story."}]


class Load:
    def __init__(self, gateway: str, ca: str, key: str, model: str, *, clients: int = 4,
                 max_tokens: int = 24, limit: int = 5000, rate: float = 2.0):
        self.api = openai.OpenAI(base_url=gateway + "/v1", api_key=key, max_retries=0, timeout=120,
                                 http_client=httpx.Client(verify=ca, limits=httpx.Limits(max_connections=64)))
        self.model, self.clients, self.max_tokens, self.limit = model, clients, max_tokens, limit
        # the clients together send at most `rate` requests a second (the gateway's limit is the key's)
        self.interval = clients / rate
        self.stop = threading.Event()
        self.results: list = []
        self.reconnected: list = []  # why each retried request's first connection ended
        self.pool = concurrent.futures.ThreadPoolExecutor(clients)
        self.jobs: list = []

    def one(self, streaming: bool) -> tuple:
        started = time.monotonic()
        result = self.attempt(streaming, started)
        if result[0] == "closed":
            self.reconnected.append(result[2])
            result = self.attempt(streaming, started)
        if result[0] == "closed":
            result = ("failed",) + result[1:]
        return result

    def attempt(self, streaming: bool, started: float) -> tuple:
        """ok, failed, or closed: no answer at all on a connection the gateway closed."""
        kind = "stream" if streaming else "chat"
        try:
            if streaming:
                finish, chunks = None, 0
                for chunk in self.api.chat.completions.create(model=self.model, messages=CHAT, stream=True,
                                                              max_tokens=self.max_tokens,
                                                              extra_body={"ignore_eos": True}):
                    chunks += 1
                    finish = chunk.choices[0].finish_reason if chunk.choices else finish
                if finish not in ("length", "stop"):
                    return ("failed", kind, "cut after %d chunks" % chunks, started)
                return ("ok", kind, "", started)
            reply = self.api.chat.completions.create(model=self.model, messages=CHAT, max_tokens=self.max_tokens,
                                                     extra_body={"ignore_eos": True})
            if reply.usage.completion_tokens < 1:
                return ("failed", kind, "no tokens", started)
            return ("ok", kind, "", started)
        except openai.APITimeoutError as exc:
            return ("failed", kind, repr(exc)[:300], started)
        except openai.APIConnectionError as exc:
            return ("closed", kind, repr(exc.__cause__ or exc)[:300], started)
        except Exception as exc:  # every failure is counted and reported
            return ("failed", kind, repr(exc)[:300], started)

    def client(self, number: int) -> None:
        for _ in range(self.limit):
            if self.stop.is_set():
                return
            result = self.one(streaming=number % 2 == 1)
            self.results.append(result)
            self.stop.wait(max(0.0, self.interval - (time.monotonic() - result[3])))

    def __enter__(self):
        self.jobs = [self.pool.submit(self.client, n) for n in range(self.clients)]
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for job in self.jobs:
            job.result()
        self.pool.shutdown()

    def summary(self) -> dict:
        kinds = collections.Counter((r[0], r[1]) for r in self.results)
        return {"sent": len(self.results), "failed": sum(r[0] == "failed" for r in self.results),
                "chat_ok": kinds[("ok", "chat")], "stream_ok": kinds[("ok", "stream")],
                "reconnected": len(self.reconnected), "closed": self.reconnected[:5],
                "failures": [r[2] for r in self.results if r[0] == "failed"][:10]}


if __name__ == "__main__":
    gateway, ca, key, model, seconds = sys.argv[1:6]
    with Load(gateway, ca, key, model) as load:
        time.sleep(float(seconds))
    print(load.summary())
