"""vLLM --config rendering, the operator-flag rules and the write-after-parse contract."""
from __future__ import annotations

import os
import sys
import textwrap

import pytest
import yaml
from ansible.module_utils.vllm_config import (
    HEADER, ConfigError, check_with_vllm, converge, describe, parse, render, staged_changes)

PLAN = {"tensor-parallel-size": 1, "max-model-len": 1024, "gpu-memory-utilization": 0.92}


def test_render_is_sorted_valid_yaml_with_the_values_vllm_reads():
    text = render({"port": 8000, "model": "/m/x y", "max-model-len": 1024, "enforce_eager": True,
                   "enable-prefix-caching": False, "gpu-memory-utilization": 0.92,
                   "kv-cache-memory-bytes": None, "tiny": 1e-05,
                   "compilation-config": {"level": 3, "cudagraph_sizes": [1, 2]}})
    assert text.startswith(HEADER)
    body = [line for line in text.splitlines() if not line.startswith("#")]
    assert body == sorted(body)
    assert yaml.safe_load(text) == {
        "port": 8000, "model": "/m/x y", "max-model-len": 1024, "enforce-eager": True,
        "enable-prefix-caching": False, "gpu-memory-utilization": 0.92, "tiny": 1e-05,
        "compilation-config": {"level": 3, "cudagraph_sizes": [1, 2]}}
    assert render({"b": 1, "a": 2}) == render({"a": 2, "b": 1})


class Checker:
    def __init__(self, verdict):
        self.verdict, self.calls = verdict, []

    def __call__(self, python, text):
        self.calls.append(text)
        return self.verdict


@pytest.fixture
def venv_python(tmp_path):
    python = tmp_path / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("")
    return str(python)


def test_a_new_file_is_written_once_vllm_accepted_it(tmp_path, venv_python):
    path = str(tmp_path / "main.yaml")
    checker = Checker({"ok": True, "version": "0.32.0"})
    result = converge(path, PLAN, venv_python, checker=checker)
    assert result["changed"] and result["validated"] and result["vllm_version"] == "0.32.0"
    assert open(path).read() == render(PLAN) == checker.calls[0]
    again = converge(path, PLAN, venv_python, checker=checker)
    assert not again["changed"] and len(checker.calls) == 1, "an unchanged file is not parsed again"


def test_a_refused_file_leaves_the_running_one_alone(tmp_path, venv_python):
    path = tmp_path / "main.yaml"
    path.write_text(render(PLAN))
    checker = Checker({"ok": False, "version": "0.32.0",
                       "error": "vllm: error: unrecognized arguments: --no-such-flag"})
    with pytest.raises(ConfigError) as refused:
        converge(str(path), dict(PLAN, **{"no-such-flag": True}), venv_python, checker=checker)
    assert str(refused.value) == (
        "preflight_vllm_args: vLLM 0.32.0 refuses the configuration for %s: vllm: error: "
        "unrecognized arguments: --no-such-flag; the running service keeps its current "
        "configuration" % path)
    assert path.read_text() == render(PLAN)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["main.yaml", "venv"], "no temporary file"


def test_check_mode_parses_but_writes_nothing(tmp_path, venv_python):
    path = tmp_path / "main.yaml"
    path.write_text(render(PLAN))
    result = converge(str(path), dict(PLAN, port=9000), venv_python, check_mode=True,
                      checker=Checker({"ok": True, "version": "0.32.0"}))
    assert result["changed"] and result["validated"]
    assert "port: 9000" in result["diff"]["after"] and "port" not in result["diff"]["before"]
    assert path.read_text() == render(PLAN)


def test_check_mode_before_the_runtime_exists_warns(tmp_path):
    result = converge(str(tmp_path / "main.yaml"), PLAN, str(tmp_path / "none/bin/python"),
                      check_mode=True, checker=Checker({"ok": False}))
    assert result["changed"] and not result["validated"]
    assert "not installed yet" in result["warnings"][0]
    with pytest.raises(ConfigError, match="no vLLM at"):
        converge(str(tmp_path / "main.yaml"), PLAN, str(tmp_path / "none/bin/python"),
                 checker=Checker({"ok": True}))


# A STAND-IN vLLM package with the interface the check script uses (module paths,
# FlexibleArgumentParser reading --config YAML, make_arg_parser, validate_parsed_serve_args),
# so that the script's own mechanics run here; the real vLLM parser runs in molecule.
STANDIN = {
    "vllm/__init__.py": "__version__ = '0.33.0+standin'\n",
    "vllm/utils/__init__.py": "",
    "vllm/utils/argparse_utils.py": """
        import argparse, yaml
        class FlexibleArgumentParser(argparse.ArgumentParser):
            def parse_args(self, args):
                path = args[args.index("--config") + 1]
                flat = []
                for key, value in yaml.safe_load(open(path)).items():
                    flat += ["--" + key] if value is True else ["--%s" % key, str(value)]
                return super().parse_args(flat)
    """,
    "vllm/entrypoints/__init__.py": "",
    "vllm/entrypoints/launchers/__init__.py": "",
    "vllm/entrypoints/launchers/cli_args.py": """
        def make_arg_parser(parser):
            parser.add_argument("--model")
            parser.add_argument("--port", type=int)
            parser.add_argument("--enforce-eager", action="store_true")
            return parser
        def validate_parsed_serve_args(args):
            if args.port == 1:
                raise ValueError("port 1 is privileged")
    """,
}


@pytest.fixture
def standin_python(tmp_path, monkeypatch):
    return _standin(tmp_path, monkeypatch, STANDIN)


def _standin(tmp_path, monkeypatch, files):
    for name, text in files.items():
        path = tmp_path / "site" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path / "site")] + sys.path))
    return sys.executable


def test_the_check_script_reports_what_the_parser_says(standin_python):
    ok = check_with_vllm(standin_python, render({"model": "/m", "port": 8000, "enforce-eager": True}))
    assert ok == {"ok": True, "version": "0.33.0+standin"}
    unknown = check_with_vllm(standin_python, render({"model": "/m", "swap-space": 4}))
    assert not unknown["ok"] and unknown["error"].endswith("unrecognized arguments: --swap-space 4")
    invalid = check_with_vllm(standin_python, render({"model": "/m", "port": 1}))
    assert invalid["error"] == "ValueError: port 1 is privileged"


def test_the_check_script_takes_an_old_release_parser_from_the_version_table(tmp_path, monkeypatch):
    """Releases before PARSER_NEW_SINCE keep the parser in vllm.entrypoints.openai.cli_args."""
    old = {name.replace("launchers", "openai"): text for name, text in STANDIN.items()}
    old["vllm/__init__.py"] = "__version__ = '0.25.1'\n"
    python = _standin(tmp_path, monkeypatch, old)
    assert check_with_vllm(python, render({"model": "/m", "port": 8000})) == {"ok": True, "version": "0.25.1"}
    old["vllm/__init__.py"] = "__version__ = '0.33.0'\n"
    python = _standin(tmp_path, monkeypatch, old)
    assert "No module named 'vllm.entrypoints.launchers'" in check_with_vllm(python, render({"model": "/m"}))["error"]


def test_the_check_script_reports_a_missing_vllm(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "")
    result = check_with_vllm(sys.executable, render({"model": "/m"}))
    assert not result["ok"] and result["error"].startswith("cannot load vLLM's parser: ")


def test_the_module_refuses_a_file_vllm_would_not_read(run_module, tmp_path):
    result = run_module("vllm_config", {"path": str(tmp_path / "main.conf"), "settings": PLAN,
                                        "python": "/none"})
    assert result["failed"] and "only *.yaml / *.yml" in result["msg"]


def test_the_module_in_check_mode_on_a_fresh_host(run_module, tmp_path):
    result = run_module("vllm_config", {"path": str(tmp_path / "main.yaml"), "settings": PLAN,
                                        "python": str(tmp_path / "none")}, check_mode=True)
    assert result["changed"] and not result["validated"]
    assert not (tmp_path / "main.yaml").exists()


def test_parse_reads_back_what_render_writes():
    settings = {"model": "/m/a", "max-model-len": 1024, "enforce-eager": True,
                "compilation-config": {"level": 3}, "gpu-memory-utilization": 0.92}
    assert parse(render(settings)) == settings


def test_describe_names_each_flag_that_changes_with_both_values():
    old = render({"model": "/m/a", "port": 8000, "enforce-eager": True})
    new = render({"model": "/m/b", "port": 8000, "shutdown-timeout": 52})
    assert describe("config", old, new) == ['enforce-eager: true -> removed', 'model: "/m/a" -> "/m/b"',
                                            "shutdown-timeout: added 52"]
    assert describe("config", old, old) == [] and describe("config", None, new) == ["new"]


def test_describe_never_shows_a_secret_and_shows_a_units_changed_lines():
    assert describe("secret", "VLLM_API_KEY=a\n", "VLLM_API_KEY=b\n") == ["values changed (not shown)"]
    assert describe("unit", "[Service]\nKillMode=control-group\n", "[Service]\nKillMode=mixed\n") == [
        "- KillMode=control-group", "+ KillMode=mixed"]


def test_describe_never_shows_the_engines_keys_in_a_config():
    """While the engines' key rotates the --config file holds the keys (api-key): the
    change report says that they change, never what they are."""
    keys = ["rotating-key-new-0123", "rotating-key-old-0123"]
    plain, both = render({"model": "/m", "port": 8000}), render({"model": "/m", "port": 8000, "api-key": keys})
    other = render({"model": "/m", "port": 8000, "api-key": [keys[0], "rotating-key-3rd-0123"]})
    reports = {"added": describe("config", plain, both), "removed": describe("config", both, plain),
               "changed": describe("config", both, other)}
    assert reports == {"added": ["api-key: added (not shown)"], "removed": ["api-key: (not shown) -> removed"],
                       "changed": ["api-key: changed (not shown)"]}
    assert not any(key in line for key in keys + ["rotating-key-3rd-0123"] for lines in reports.values()
                   for line in lines)


def test_staged_changes_lists_the_files_that_differ_from_the_running_ones():
    disk = {"/n/main.yaml": render({"model": "/m/b"}), "/l/main.yaml": render({"model": "/m/a"}),
            "/n/main.env": "K=1\n", "/l/main.env": "K=1\n", "/n/r.yaml": render({"model": "/m/b"})}
    files = [{"name": "main.yaml", "staged": "/n/main.yaml", "live": "/l/main.yaml", "kind": "config"},
             {"name": "main.env", "staged": "/n/main.env", "live": "/l/main.env", "kind": "secret"},
             {"name": "r.yaml", "staged": "/n/r.yaml", "live": "/l/r.yaml", "kind": "config"},
             {"name": "vllm@.service", "staged": "/n/u", "live": "/l/u", "kind": "unit"}]
    result = staged_changes(files, disk.get)
    assert result["changed"] == ["main.yaml", "r.yaml", "vllm@.service"]
    assert result["details"] == {"main.yaml": ['model: "/m/a" -> "/m/b"'], "r.yaml": ["new"],
                                 "vllm@.service": ["not staged yet"]}
