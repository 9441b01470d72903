"""The fleet's front door, from the control node as a client sees it: the official
openai client through the gateway (TLS verified against the fleet CA), the keys, the
limits, the allowlist against every route the engine registers, engines closed to
every host but the gateway, and a load that outlives a kill -9 of one engine."""
from __future__ import annotations

import collections
import concurrent.futures
import datetime
import json
import re
import shlex
import socket
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import openai
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tools"))
from playbook_output import recap_changed  # noqa: E402
from serve_hosts import CA, address, other, PROJECT, site  # noqa: E402

testinfra_hosts = ["ansible://mirror"]
KEYS = {"tester": "molecule-tester-key-0123", "slow": "molecule-slow-key-012345",
        "small": "molecule-small-key-01234", "rotating": "molecule-rotating-new-0123"}
ENGINE_KEY = "molecule-serve-key"
ROTATING = ["molecule-rotating-new-0123", "molecule-rotating-old-0123"]
ALLOWED = ["/v1/chat/completions", "/v1/completions", "/v1/models"]
MODEL = "tiny-gemma4"
CHAT = [{"role": "user", "content": "Hello"}]
DEFAULTS = yaml.safe_load((PROJECT / "roles" / "gateway" / "defaults" / "main.yml").read_text())


@pytest.fixture(scope="module")
def gateway(host) -> str:
    return "https://%s:443" % address(host)


def client(gateway: str, name: str = "tester") -> openai.OpenAI:
    # max_retries=0: what the gateway does is measured, not the client's own retries.
    return openai.OpenAI(base_url=gateway + "/v1", api_key=KEYS[name], max_retries=0, timeout=120,
                         http_client=httpx.Client(verify=str(CA)))


def raw(gateway: str, path: str, key: str | None = KEYS["tester"], method: str = "POST", body=None):
    headers = {"Authorization": "Bearer " + key} if key else {}
    if body is not None:
        headers["Content-Type"] = "application/json"
    with httpx.Client(verify=str(CA), timeout=60) as http:
        return http.request(method, gateway + path, headers=headers, content=body,
                            json=None if body is not None or method == "GET" else
                            {"model": MODEL, "messages": CHAT, "max_tokens": 4})


def test_chat_completion_and_stream_through_the_gateway(gateway):
    api = client(gateway)
    assert [m.id for m in api.models.list().data] == [MODEL]
    chat = api.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=8)
    assert chat.usage.completion_tokens >= 1 and isinstance(chat.choices[0].message.content, str)
    completion = api.completions.create(model=MODEL, prompt="The fleet", max_tokens=8)
    assert completion.usage.completion_tokens >= 1
    chunks = list(api.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=8, stream=True))
    assert len(chunks) >= 2 and chunks[-1].choices[0].finish_reason in ("stop", "length")


@pytest.mark.parametrize("key", [None, "wrong-key-0123456789abcdef", ENGINE_KEY], ids=["none", "wrong", "engine"])
def test_a_request_without_a_client_key_gets_401_in_openai_style(gateway, key):
    answer = raw(gateway, "/v1/chat/completions", key)
    assert answer.status_code == 401
    assert answer.json()["error"]["code"] == "invalid_api_key"
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=gateway + "/v1", api_key=key or "x", max_retries=0,
                      http_client=httpx.Client(verify=str(CA))).models.list()


def test_a_key_that_differs_only_in_letter_case_is_refused(gateway):
    """nginx's map compares plain strings without case: the keys are matched as
    case-sensitive expressions instead."""
    assert raw(gateway, "/v1/models", KEYS["tester"], "GET").status_code == 200
    for variant in (KEYS["tester"].upper(), KEYS["tester"].capitalize()):
        assert raw(gateway, "/v1/models", variant, "GET").status_code == 401


def test_a_flood_without_a_key_is_limited_by_address(gateway):
    """300 requests without a key, one after the other on one connection: past the
    address's burst and rate they get 429, not 401 (nothing answers a key guess faster)."""
    rate, burst = DEFAULTS["gateway_address_rate_per_second"], DEFAULTS["gateway_address_burst"]
    counts, started = collections.Counter(), time.monotonic()
    with httpx.Client(verify=str(CA), timeout=30) as http:
        for _ in range(300):
            counts[http.get(gateway + "/v1/models").status_code] += 1
    took = time.monotonic() - started
    print("300 requests without a key in %.1fs: %s" % (took, dict(counts)))
    time.sleep(burst / rate + 1)  # the address's burst refills for the next tests
    assert set(counts) == {401, 429}, counts
    assert counts[401] <= burst + rate * took + 1, counts


def test_a_slow_client_is_cut_after_the_client_timeout(gateway):
    """Half a request header, then nothing: nginx closes the connection after
    gateway_client_timeout (client_header_timeout), freeing it."""
    host, port = gateway.split("//")[1].rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(CA))
    context.check_hostname = False
    with context.wrap_socket(socket.create_connection((host, int(port)), timeout=60)) as conn:
        conn.sendall(b"GET /v1/models HTTP/1.1\r\nHost: gateway\r\n")
        started = time.monotonic()
        answer = conn.recv(1024)
        took = time.monotonic() - started
    print("half a header: closed after %.1fs (%r)" % (took, answer[:12]))
    assert answer in (b"", ) or answer.startswith(b"HTTP/1.1 408"), answer
    assert took < DEFAULTS["gateway_client_timeout"] + 5


def test_tls_takes_the_intermediate_suites_alone(gateway):
    """A CBC suite with SHA-1 MACs (which OpenSSL still offers at level 0) is refused; an
    AEAD suite is taken.  nginx's workers may hold as many descriptors as connections ask."""
    host, port = gateway.split("//")[1].rsplit(":", 1)

    def handshake(ciphers: str) -> str:
        context = ssl.create_default_context(cafile=str(CA))
        context.check_hostname = False
        context.maximum_version = ssl.TLSVersion.TLSv1_2
        context.set_ciphers(ciphers)
        try:
            with context.wrap_socket(socket.create_connection((host, int(port)), timeout=10)) as conn:
                return conn.cipher()[0]
        except ssl.SSLError as exc:
            return "refused: %s" % exc.reason
    # (the generated certificate's key is ECDSA, P-384)
    assert handshake("ECDHE-ECDSA-AES128-SHA:@SECLEVEL=0").startswith("refused")
    assert handshake("ECDHE-ECDSA-AES128-GCM-SHA256") == "ECDHE-ECDSA-AES128-GCM-SHA256"


def test_nginx_workers_may_open_twice_their_connections(host):
    worker = host.check_output("pgrep -u www-data -x nginx | head -1")
    limits = host.file("/proc/%s/limits" % worker).content_string
    soft = int(re.search(r"^Max open files\s+(\d+)", limits, re.M).group(1))
    connections = int(re.search(r"worker_connections (\d+);", host.file("/etc/nginx/nginx.conf").content_string)
                      .group(1))
    assert soft >= 2 * connections, (soft, connections)


def test_past_the_rate_comes_429_with_retry_after(gateway):
    statuses = [raw(gateway, "/v1/models", KEYS["slow"], "GET") for _ in range(3)]
    assert [a.status_code for a in statuses] == [200, 429, 429]
    assert statuses[1].headers["Retry-After"] == "1"
    assert statuses[1].json()["error"]["code"] == "rate_limit_exceeded"


def test_past_the_body_size_comes_413(gateway):
    small = json.dumps({"model": MODEL, "messages": CHAT, "max_tokens": 4}).encode()
    assert raw(gateway, "/v1/chat/completions", KEYS["small"], body=small).status_code == 200
    # 1.4 KB, a few hundred tokens (within the context)
    large = json.dumps({"model": MODEL, "max_tokens": 4,
                        "messages": [{"role": "user", "content": "hello fleet " * 120}]}).encode()
    answer = raw(gateway, "/v1/chat/completions", KEYS["small"], body=large)
    assert answer.status_code == 413 and answer.json()["error"]["code"] == "request_too_large"
    # the same body is within the default client's 1m
    assert raw(gateway, "/v1/chat/completions", KEYS["tester"], body=large).status_code == 200


def test_every_route_the_engine_registers_but_the_allowlist_is_404(host, gateway):
    """The routes come from the engine's own start-up log (`Route: /path, Methods: ...`)."""
    log = other(host, "node1").check_output("journalctl --no-pager -o cat -u vllm@main.service")
    routes = dict(re.findall(r"Route: (\S+), Methods: ([A-Z, ]+)", log))
    assert "/metrics" in routes and "/invocations" in routes and "/v1/chat/completions" in routes
    checked = {}
    for path, methods in sorted(routes.items()):
        if path in ALLOWED:
            continue
        method = "POST" if "POST" in methods else methods.split(",")[0].strip()
        concrete = re.sub(r"\{[^}]+\}", "x", path)
        checked[path] = raw(gateway, concrete, KEYS["tester"], method, body=b"{}").status_code
    print("routes checked through the gateway:", json.dumps(checked, sort_keys=True))
    assert checked and set(checked.values()) == {404}, checked


def test_the_engines_answer_the_gateway_alone(host):
    node1, node2 = other(host, "node1"), other(host, "node2")
    engine = "%s:8000" % address(node1)
    probe = ("import socket, sys\ntry:\n    socket.create_connection((sys.argv[1], 8000), timeout=5).close()"
             "\n    print('open')\nexcept OSError as e:\n    print(type(e).__name__)")
    assert node2.check_output("python3 -c %s %s" % (shlex.quote(probe), address(node1))) == "ConnectionRefusedError"
    health = "import urllib.request, sys; print(urllib.request.urlopen(sys.argv[1]).status)"
    assert host.check_output("python3 -c %s http://%s/health" % (shlex.quote(health), engine)) == "200"
    assert node1.check_output("python3 -c %s http://%s/health" % (shlex.quote(health), engine)) == "200"


def test_a_killed_engine_loses_no_request_that_was_not_streaming(host, gateway):
    """8 long streams through the gateway; once one flows, 48 completions (8 at a time);
    once every stream flows (or one is two thirds done), node1's engine is killed (SIGKILL).
    The gateway retries on node2 what had not reached the client yet: no completion fails.
    A stream already flowing from node1 cannot be retried: it is cut, and nginx closes it
    as if it had ended, so the client's stream stops early, without the chunk that carries
    a finish_reason.  A client must treat such a stream as failed; none fails before its
    first chunk.  The streams go as client `rotating`, the completions as `tester`, so that
    the gateway's log says which engine served each stream: the streams cut are exactly
    node1's, however many least connections gave it.

    The streams time the kill, not a clock: the two CPU engines run at speeds that differ by
    up to 3x here (one engine's streams finished their 900 chunks in 6 s while the other's
    were at 200-350, with the files run in reverse order), and a fixed second after the last
    first chunk let one engine's streams end before the kill.  The stream whose chunk meets
    the condition sends the kill itself: a check in the test's main thread once fired 2.6 s
    late, not scheduled beside 16 client threads and two busy engines on two cores."""
    node1 = other(host, "node1")
    log = "/var/log/nginx/vllm-fleet-access.log"
    logged = len(host.file(log).content_string.splitlines())
    # docker exec, not an Ansible call: under this load Ansible takes seconds to start
    kill = ["docker", "exec", node1.ansible.get_variables()["ansible_host"],
            "systemctl", "kill", "--signal=KILL", "vllm@main.service"]
    api, stream_api = client(gateway), client(gateway, "rotating")
    flowing, fired = [threading.Event() for _ in range(8)], threading.Event()
    restarts = int(node1.check_output("systemctl show --property=NRestarts --value vllm@main.service"))

    def complete(_n):
        try:
            reply = api.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=192,
                                                extra_body={"ignore_eos": True})
            return ("ok", reply.usage.completion_tokens)
        except Exception as exc:  # every failure is counted and reported
            return ("failed", repr(exc))

    ended, first, chunks = [None] * 8, [None] * 8, [0] * 8
    started = time.monotonic()
    kill_lock, killing = threading.Lock(), {}

    def kill_once():
        """Send the kill from the stream thread that sees the moment, once: the time it is
        sent, each stream's chunks then, the docker exec (waited for by the test)."""
        with kill_lock:
            if not killing:
                killing.update(sent=time.monotonic(), at_kill=list(chunks),
                               process=subprocess.Popen(kill, stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
                fired.set()

    def stream(n):
        received, finish = 0, None
        try:
            for chunk in stream_api.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=900, stream=True,
                                                            extra_body={"ignore_eos": True}):
                received += 1
                chunks[n] = received
                first[n] = first[n] or time.monotonic()
                finish = chunk.choices[0].finish_reason if chunk.choices else finish
                flowing[n].set()
                if not fired.is_set() and (received >= 600 or all(event.is_set() for event in flowing)):
                    kill_once()
        except Exception as exc:
            return ("cut" if received else "failed", "%d chunks, then %s" % (received, type(exc).__name__))
        finally:
            ended[n] = time.monotonic()
        return ("ok" if finish == "length" else "cut", "%d chunks, finish_reason %s" % (received, finish))

    try:
        with concurrent.futures.ThreadPoolExecutor(8) as streams_pool, \
                concurrent.futures.ThreadPoolExecutor(8) as completions_pool:
            streams = [streams_pool.submit(stream, n) for n in range(8)]
            deadline = time.monotonic() + 120
            while not any(event.is_set() for event in flowing):
                assert time.monotonic() < deadline, "no stream started"
                time.sleep(0.02)
            completions = [completions_pool.submit(complete, n) for n in range(48)]
            assert fired.wait(max(0.0, deadline - time.monotonic())), "the streams did not start: %s" % chunks
            output, _ = killing["process"].communicate()
            assert killing["process"].returncode == 0, output
            killed = time.monotonic()
            sent, at_kill = killing["sent"], killing["at_kill"]
            streams = [job.result() for job in streams]
            completions = [job.result() for job in completions]
    finally:
        # node1 comes back (systemd restarts it; the unit is active once /health answers)
        deadline = time.monotonic() + 600
        while node1.run("systemctl is-active vllm@main.service").stdout.strip() != "active":
            assert time.monotonic() < deadline, "vllm@main did not come back"
            time.sleep(5)
    print("systemd restarted vllm@main: healthy again %.0fs after the kill" % (time.monotonic() - killed))
    assert int(node1.check_output("systemctl show --property=NRestarts --value vllm@main.service")) == restarts + 1
    cut = [r for r in streams if r[0] == "cut"]
    print("completions: %d sent, %d failed; streams: %d sent, %d completed, %d cut mid-way, %d failed before "
          "a chunk" % (len(completions), sum(r[0] != "ok" for r in completions), len(streams),
                       sum(r[0] == "ok" for r in streams), len(cut), sum(r[0] == "failed" for r in streams)))
    print("streams:", streams)
    print("first chunk after (s):", [t and round(t - started, 1) for t in first], "chunks when the kill was sent:", at_kill,
          "kill sent after %.1fs" % (sent - started))
    assert [r for r in completions if r[0] != "ok"] == []
    assert [r for r in streams if r[0] == "failed"] == []
    # Where the streams land is nginx's choice (least connections put 4 on node1 in two runs,
    # none in two others); the log names the engine of each, so the count is asserted.
    entries = [json.loads(line) for line in host.file(log).content_string.splitlines()[logged:]]
    engines = [e["upstream"] for e in entries if e["client"] == "rotating" and e["path"] == "/v1/chat/completions"]
    node1_engine = "%s:8000" % address(node1)
    on_node1 = [u for u in engines if u == node1_engine]
    print("streams by engine (gateway log):", engines)
    retried = [e for e in entries if e["client"] == "tester" and e["upstream"].startswith(node1_engine + ", ")]
    print("completions tried on node1, then answered by node2:", len(retried))
    assert retried, "no completion went to node1 around the kill: the retry was not tried"
    # a stream of node1's that ended before the kill would break the count: say which ended
    early = [n for n in range(8) if ended[n] < sent]
    assert len(engines) == 8 and len(cut) == len(on_node1), (engines, streams, "ended before the kill: %s" % early)


def test_a_rotating_client_is_served_with_either_key_under_its_one_name(host, gateway):
    """keys: [new, old] (docs/day2.md, "Rotating a client's key"): both keys are the
    client's, a key differing from both is not."""
    before = len(host.file("/var/log/nginx/vllm-fleet-access.log").content_string.splitlines())
    for key in ROTATING:
        assert raw(gateway, "/v1/models", key, "GET").status_code == 200
    assert raw(gateway, "/v1/models", ROTATING[0][:-1] + "9", "GET").status_code == 401
    log = host.file("/var/log/nginx/vllm-fleet-access.log").content_string
    entries = [e for e in map(json.loads, log.splitlines()[before:]) if e["path"] == "/v1/models"]
    assert [(e["client"], e["status"]) for e in entries] == [("rotating", 200), ("rotating", 200), ("", 401)]
    keys = host.file("/etc/nginx/vllm-fleet-keys.conf").content_string
    assert all(('"~^Bearer %s$" "rotating";' % re.escape(key)) in keys for key in ROTATING)
    assert not any(key in log for key in ROTATING)


def test_the_access_log_names_clients_and_engines_and_holds_no_key(host):
    log = host.file("/var/log/nginx/vllm-fleet-access.log").content_string
    entries = [json.loads(line) for line in log.splitlines()]
    assert {e["client"] for e in entries} >= {"tester", "slow", "small", ""}
    upstreams = {u.split(":")[0] for e in entries for u in re.split(r"[ ,]+", e["upstream"]) if u}
    assert len(upstreams) == 2, upstreams
    for secret in list(KEYS.values()) + [ENGINE_KEY]:
        assert secret not in log
    keys = host.file("/etc/nginx/vllm-fleet-keys.conf")
    # (each key stands as a case-sensitive expression: its '-' and '.' escaped)
    assert keys.mode == 0o600 and keys.user == "root" and re.escape(KEYS["tester"]) in keys.content_string
    assert not any(secret in host.file("/etc/nginx/nginx.conf").content_string
                   for secret in list(KEYS.values()) + [ENGINE_KEY])


PKI = "/etc/nginx/vllm-fleet/"
DAYS_LEFT = ("import datetime; from cryptography import x509; c = x509.load_pem_x509_certificate(open("
             "'/etc/nginx/vllm-fleet/server.crt', 'rb').read()); print((c.not_valid_after - "
             "datetime.datetime.utcnow()).days)")


def put(host, path: str, data: bytes):
    subprocess.run(["docker", "exec", "-i", host.ansible.get_variables()["ansible_host"], "sh", "-c",
                    "cat > %s" % shlex.quote(path)], input=data, check=True)


def one_day_certificate(server_pem: bytes, ca_key_pem: bytes) -> bytes:
    """The gateway's server certificate signed again by the fleet CA for one day (what an
    old certificate looks like)."""
    old, ca_key = x509.load_pem_x509_certificate(server_pem), serialization.load_pem_private_key(ca_key_pem, None)
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(old.subject).issuer_name(old.issuer).public_key(old.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(now)
               .not_valid_after(now + datetime.timedelta(days=1)))
    for extension in old.extensions:
        builder = builder.add_extension(extension.value, extension.critical)
    return builder.sign(ca_key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


def test_the_fleet_ca_signs_on_the_control_node_for_the_gateways_names_alone(host):
    """The CA's key is on the control node (0600), never on the gateway; its certificate
    permits the gateway's names alone (critical name constraints); the server certificate
    chains to it."""
    assert not host.file(PKI + "ca.key").exists and not host.file(PKI + "ca.crt").exists
    key = CA.with_name("mirror-ca.key")
    assert key.stat().st_mode & 0o777 == 0o600
    ca = x509.load_pem_x509_certificate(CA.read_bytes())
    constraints = ca.extensions.get_extension_for_class(x509.NameConstraints)
    server = x509.load_pem_x509_certificate(host.file(PKI + "server.crt").content)
    names = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert constraints.critical and constraints.value.excluded_subtrees is None
    permitted = {(type(n).__name__, str(n.value)) for n in constraints.value.permitted_subtrees}
    assert permitted == {("DNSName", str(n.value)) if isinstance(n, x509.DNSName)
                         else ("IPAddress", "%s/32" % n.value) for n in names}, permitted
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.path_length == 0
    server.verify_directly_issued_by(ca)


def test_the_fleet_ca_moves_off_the_gateway_and_a_certificate_near_its_end_is_renewed(host, gateway):
    """What an earlier release left: the CA on the gateway (and not on the control node),
    the server certificate one day from its end.  With the CA in neither place a run is
    refused before the gateway changes; with it on the gateway the next run moves it to
    the control node unchanged, removes it from the gateway and signs the certificate for
    825 days, which clients verify with the CA certificate they already have."""
    key_path = CA.with_name("mirror-ca.key")
    ca_pem, key_pem = CA.read_bytes(), key_path.read_bytes()
    put(host, PKI + "server.crt", one_day_certificate(host.file(PKI + "server.crt").content, key_pem))
    assert int(host.check_output("python3 -c %s" % shlex.quote(DAYS_LEFT))) == 0
    CA.unlink()
    key_path.unlink()
    try:
        rc, refused, _took = site("--tags", "gateway")
        assert rc != 0 and "gateway_ca_dir: %s is not on this control node" % key_path in refused
        assert recap_changed(refused).get("mirror", 0) == 0, refused[-3000:]
        put(host, PKI + "ca.key", key_pem)
        put(host, PKI + "ca.crt", ca_pem)
        rc, output, took = site("--tags", "gateway")
    finally:
        if not key_path.exists():
            key_path.write_bytes(key_pem)
            key_path.chmod(0o600)
            CA.write_bytes(ca_pem)
    assert rc == 0, output[-3000:]
    assert key_path.read_bytes() == key_pem and key_path.stat().st_mode & 0o777 == 0o600
    assert not host.file(PKI + "ca.key").exists and not host.file(PKI + "ca.crt").exists
    left = int(host.check_output("python3 -c %s" % shlex.quote(DAYS_LEFT)))
    print("CA moved to the control node, certificate with 0 days left renewed to %d days by site.yml "
          "--tags gateway (%.0fs)" % (left, took))
    assert left >= 824
    assert [m.id for m in openai.OpenAI(base_url=gateway + "/v1", api_key=KEYS["tester"], max_retries=0, timeout=120,
                                        http_client=httpx.Client(verify=ssl.create_default_context(
                                            cadata=ca_pem.decode()))).models.list().data] == [MODEL]
