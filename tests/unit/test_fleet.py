from __future__ import annotations

import pytest

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
