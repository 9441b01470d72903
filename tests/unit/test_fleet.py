from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import fleet


def test_parse_hosts_with_per_host_release():
    assert fleet.parse_hosts("a,b:trixie,,c:bullseye", "bookworm") == [
        ("a", "bookworm"), ("b", "trixie"), ("c", "bullseye")]


def test_parse_hosts_rejects_unknown_release():
    with pytest.raises(SystemExit, match="unknown release 'jessie'"):
        fleet.parse_hosts("a:jessie", "bookworm")


def test_recipe_hash_changes_with_the_recipe(monkeypatch):
    before = fleet.recipe_hash("bookworm")
    assert before == fleet.recipe_hash("bookworm") != fleet.recipe_hash("trixie")
    monkeypatch.setattr(fleet, "PACKAGES", fleet.PACKAGES + ("vim",))
    assert fleet.recipe_hash("bookworm") != before


def test_run_options_boot_systemd_without_privileged():
    opts = " ".join(fleet.RUN_OPTIONS)
    assert "--privileged" not in opts
    assert "--cap-add SYS_ADMIN" in opts and "--cgroupns=host" in opts


def test_stale_pidfile_is_removed_live_one_kept(tmp_path):
    import os

    stale = tmp_path / "stale.pid"
    stale.write_text("999999999\n")
    fleet.clear_stale_pidfile(stale)
    assert not stale.exists()
    live = tmp_path / "live.pid"
    live.write_text(f"{os.getpid()}\n")
    fleet.clear_stale_pidfile(live)
    assert live.exists()


def test_the_ssh_config_maps_each_name_to_its_address_and_checks_host_keys(tmp_path, monkeypatch):
    monkeypatch.setattr(fleet, "SSH_DIR", tmp_path)
    config, known = fleet.ssh_files("demo", {"demo-node1": ("172.18.0.3", "ssh-ed25519 AAAAnode1 root@demo-node1"),
                                             "demo-mirror": ("172.18.0.2", "ssh-ed25519 AAAAmirror")},
                                    tmp_path / "fleet_ed25519")
    assert "Host demo-mirror\n  HostName 172.18.0.2\n  HostKeyAlias demo-mirror\n" in config
    assert "Host demo-node1\n  HostName 172.18.0.3\n" in config
    assert "  StrictHostKeyChecking yes\n" in config and "  UserKnownHostsFile %s/demo.known_hosts\n" % tmp_path in config
    assert "  IdentityFile %s/fleet_ed25519\n" % tmp_path in config and "  User root\n" in config
    # each host's own key, the comment dropped
    assert known == "demo-mirror ssh-ed25519 AAAAmirror\ndemo-node1 ssh-ed25519 AAAAnode1\n"


def test_the_demo_settings_for_another_fleet_point_into_this_repository():
    settings = yaml.safe_load(fleet.demo_settings())
    assert "inventory_dir" not in fleet.demo_settings()
    assert [Path(p["src"]).is_dir() for p in settings["hf_mirror_publish"]] == [True]
    assert settings["vllm_fleet_model_repo"] == "demo/tiny-gemma4"
