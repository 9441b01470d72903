"""files_state.drift: files, folders, commands and units that are as a role's change path
sets them read as in place; each difference that path would correct reads in words."""
from __future__ import annotations

import grp
import os
import pwd

from ansible.module_utils.files_state import drift

USER = pwd.getpwuid(os.geteuid()).pw_name
GROUP = grp.getgrgid(os.getegid()).gr_name


def units(answers: dict):
    """A systemctl that answers from ``answers[(verb, unit)]``."""
    return lambda verb, unit: answers[(verb, unit)]


def converged(tmp_path):
    folder = tmp_path / "d"
    folder.mkdir()
    folder.chmod(0o755)
    config = folder / "a.conf"
    config.write_text("listen 443;\n")
    config.chmod(0o644)
    return [dict(path=str(folder), state="directory", owner=USER, group=GROUP, mode="0755"),
            dict(path=str(config), content="listen 443;\n", owner=USER, group=GROUP, mode="0644")]


ACTIVE = units({("is-active", "x.service"): "active", ("is-enabled", "x.service"): "enabled"})


def test_files_folders_commands_and_units_as_wanted_are_in_place(tmp_path):
    assert drift(converged(tmp_path), ["/bin/sh"], ["x.service"], ACTIVE) == []


def test_a_changed_or_missing_content_is_a_difference(tmp_path):
    files = converged(tmp_path)
    (tmp_path / "d" / "a.conf").write_text("listen 80;\n")
    assert drift(files, [], [], ACTIVE) == ["%s differs from what the role writes" % files[1]["path"]]
    # (a trailing newline is content too)
    (tmp_path / "d" / "a.conf").write_text("listen 443;")
    assert drift(files, [], [], ACTIVE) == ["%s differs from what the role writes" % files[1]["path"]]
    (tmp_path / "d" / "a.conf").unlink()
    assert drift(files, [], [], ACTIVE) == ["%s is missing" % files[1]["path"]]


def test_a_mode_owner_or_group_is_a_difference(tmp_path):
    files = converged(tmp_path)
    os.chmod(files[1]["path"], 0o600)
    files[0].update(owner="nobody", group="nogroup" if _exists_group("nogroup") else "daemon")
    assert drift(files, [], [], ACTIVE) == [
        "%s is not owned by owner nobody" % files[0]["path"],
        "%s is not owned by group %s" % (files[0]["path"], files[0]["group"]),
        "%s has mode 0600, not 0644" % files[1]["path"]]


def test_an_owner_that_does_not_exist_is_a_difference(tmp_path):
    files = converged(tmp_path)
    files[1]["owner"] = "no-such-user-here"
    assert drift(files, [], [], ACTIVE) == ["%s: the owner no-such-user-here does not exist" % files[1]["path"]]


def test_a_file_where_a_folder_belongs_and_the_reverse_are_differences(tmp_path):
    files = converged(tmp_path)
    files[0]["path"], files[1]["path"] = files[1]["path"], files[0]["path"]
    assert drift(files, [], [], ACTIVE) == ["%s is not a folder" % files[0]["path"],
                                            "%s is not a regular file" % files[1]["path"]]


def test_a_symlink_to_the_right_content_is_a_difference(tmp_path):
    files = converged(tmp_path)
    target = tmp_path / "elsewhere.conf"
    target.write_text("listen 443;\n")
    os.unlink(files[1]["path"])
    os.symlink(target, files[1]["path"])
    assert drift(files, [], [], ACTIVE) == ["%s is not a regular file" % files[1]["path"]]


def test_a_command_not_installed_is_a_difference(tmp_path):
    assert drift([], [str(tmp_path / "nft")], [], ACTIVE) == ["%s is not installed" % (tmp_path / "nft")]


def test_a_path_that_must_be_gone_is_a_difference(tmp_path):
    files = converged(tmp_path)
    assert drift(files, [], [], ACTIVE, absent=[str(tmp_path / "d" / "old.json")]) == []
    (tmp_path / "d" / "old.json").write_text("[]")
    assert drift(files, [], [], ACTIVE, absent=[str(tmp_path / "d" / "old.json")]) == [
        "%s is still there" % (tmp_path / "d" / "old.json")]


def test_a_stopped_or_disabled_unit_is_a_difference():
    stopped = units({("is-active", "x.service"): "inactive", ("is-enabled", "x.service"): "disabled"})
    assert drift([], [], ["x.service"], stopped) == ["x.service is inactive, not active",
                                                     "x.service is disabled at boot, not enabled"]
    unknown = units({("is-active", "x.service"): "", ("is-enabled", "x.service"): ""})
    assert drift([], [], ["x.service"], unknown) == ["x.service is unknown, not active",
                                                     "x.service is unknown at boot, not enabled"]


def test_the_module_reports_in_place_and_the_drift_and_never_a_content(tmp_path, run_module):
    files = converged(tmp_path)
    result = run_module("files_check", dict(files=files), check_mode=True)
    assert result == dict(changed=False, in_place=True, drift=[], invocation=result["invocation"])
    # (a content may hold a secret: the result never shows it)
    assert "listen 443" not in str(result)
    (tmp_path / "d" / "a.conf").write_text("listen 80;\n")
    result = run_module("files_check", dict(files=files, commands=[str(tmp_path / "nft")]))
    assert not result["in_place"] and result["drift"] == [
        "%s is not installed" % (tmp_path / "nft"), "%s differs from what the role writes" % files[1]["path"]]


def _exists_group(name: str) -> bool:
    try:
        grp.getgrnam(name)
    except KeyError:
        return False
    return True
