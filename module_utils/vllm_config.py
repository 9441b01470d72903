"""vLLM's ``--config`` file: rendered the same way every time, and accepted by the
installed vLLM's own argument parser before it replaces the file a service runs with.

The file is YAML whose keys are flag names without ``--`` (``tensor-parallel-size: 2``);
``true`` becomes a bare flag and ``false`` ``--no-X`` (vLLM's ``load_config_file``).
Every value is written as JSON, which is also YAML, so the host needs no YAML library:
nested values (``compilation-config``) are what vLLM turns into JSON arguments anyway.
"""
from __future__ import annotations

import json
import os
import subprocess
import tempfile

from ansible.module_utils.vllm_args import flag_name
from ansible.module_utils.vllm_versions import PARSER_NEW, PARSER_NEW_SINCE, PARSER_OLD

HEADER = ("# Managed by vllm-fleet (role vllm_service); vLLM reads it with --config.\n"
          "# Keys are vLLM flag names; change them through the inventory, not here.\n")
RESULT_MARK = "VLLM_FLEET_CONFIG_CHECK "
# Runs inside the host's vLLM venv: parse the file exactly as the server will
# (`python -m vllm.entrypoints.openai.api_server --config FILE`) and print one line.
# The parser's module per release is the version table's (vllm_versions.PARSER_*).
CHECK_SCRIPT = r"""
import contextlib, importlib, io, json, re, sys
out = {"ok": False}
try:
    import vllm
    out["version"] = vllm.__version__
    from vllm.utils.argparse_utils import FlexibleArgumentParser
    release = tuple(int(p) for p in re.findall(r"\d+", vllm.__version__.split("+")[0])[:2])
    cli_args = importlib.import_module(__NEW__ if release >= __SINCE__ else __OLD__)
    parser = cli_args.make_arg_parser(FlexibleArgumentParser(prog="vllm"))
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = parser.parse_args(["--config", sys.argv[1]])
        cli_args.validate_parsed_serve_args(args)
        out["ok"] = True
    except SystemExit:
        lines = [l for l in err.getvalue().splitlines() if l.strip()]
        out["error"] = lines[-1] if lines else "the parser exited"
    except Exception as exc:
        out["error"] = "%s: %s" % (type(exc).__name__, exc)
except Exception as exc:
    out["error"] = "cannot load vLLM's parser: %s: %s" % (type(exc).__name__, exc)
print("%s%s" % (__MARK__, json.dumps(out)))
""".replace("__MARK__", repr(RESULT_MARK)).replace("__NEW__", repr(PARSER_NEW)).replace(
    "__OLD__", repr(PARSER_OLD)).replace("__SINCE__", repr(PARSER_NEW_SINCE))


class ConfigError(Exception):
    pass


def _scalar(value) -> str:
    if isinstance(value, float):
        text = repr(value)
        # YAML 1.1 (PyYAML) reads 1e-05 as a string; 1.0e-05 is a float.
        return text if "." in text or "e" not in text else text.replace("e", ".0e", 1)
    return json.dumps(value, sort_keys=True)


def render(settings: dict) -> str:
    """The file's text: the header and one ``flag: value`` line per setting, sorted."""
    lines = sorted("%s: %s" % (flag_name(key), _scalar(value))
                   for key, value in settings.items() if value is not None)
    return HEADER + "".join(line + "\n" for line in lines)


def parse_result(stdout: str) -> dict:
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_MARK):
            return json.loads(line[len(RESULT_MARK):])
    return {"ok": False, "error": "the check printed no result"}


def check_with_vllm(python: str, text: str, run=subprocess.run, timeout: int = 600) -> dict:
    """Have the vLLM installed beside ``python`` parse ``text`` as a --config file.

    Returns ``{"ok": bool, "version": str, "error": str}``.  vLLM only reads files
    named ``*.yaml``/``*.yml``, so the text goes into a temporary one.
    """
    with tempfile.TemporaryDirectory(prefix="vllm-fleet-config-") as tmp:
        path = os.path.join(tmp, "candidate.yaml")
        with open(path, "w") as handle:
            handle.write(text)
        proc = run([python, "-c", CHECK_SCRIPT, path], capture_output=True, text=True,
                   timeout=timeout, env=dict(os.environ, VLLM_CONFIGURE_LOGGING="0"))
    result = parse_result(proc.stdout)
    if not result.get("ok") and "error" not in result:
        result["error"] = (proc.stderr.strip().splitlines() or ["exit %d" % proc.returncode])[-1]
    return result


def converge(path: str, settings: dict, python: str, *, validate: bool = True,
             check_mode: bool = False, variable: str = "preflight_vllm_args",
             checker=check_with_vllm) -> dict:
    """Put ``settings`` into ``path`` when they differ, after vLLM accepted them.

    A refused file raises ConfigError naming ``variable`` and the parser's message;
    the existing file is left as it was.  In check mode the parser still runs when
    vLLM is installed (it only reads), and the file is not written.
    """
    after = render(settings)
    before = None
    if os.path.exists(path):
        with open(path) as handle:
            before = handle.read()
    result = {"changed": before != after, "path": path, "validated": False, "warnings": [],
              "diff": {"before": before or "", "after": after,
                       "before_header": path, "after_header": path}}
    if not result["changed"] or not validate:
        return result
    if not os.path.exists(python):
        if check_mode:
            result["warnings"].append("%s is not installed yet: the parser check runs "
                                      "when the runtime exists" % python)
            return result
        raise ConfigError("%s: no vLLM at %s to check the configuration with" % (variable, python))
    verdict = checker(python, after)
    if not verdict.get("ok"):
        raise ConfigError("%s: vLLM %s refuses the configuration for %s: %s; the running "
                          "service keeps its current configuration"
                          % (variable, verdict.get("version", "?"), path, verdict.get("error")))
    result.update(validated=True, vllm_version=verdict.get("version"))
    if not check_mode:
        directory = os.path.dirname(path)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".vllm-config-", suffix=".yaml")
        with os.fdopen(fd, "w") as handle:
            handle.write(after)
        os.replace(tmp, path)
    return result


def parse(text: str) -> dict:
    """The settings of a file ``render()`` wrote (every value is JSON)."""
    settings = {}
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            key, _sep, value = line.partition(": ")
            try:
                settings[key] = json.loads(value)
            except ValueError:
                settings[key] = value
    return settings


def _show(value) -> str:
    return json.dumps(value, sort_keys=True)


# Flags whose values a change report never shows (the engines' keys while they rotate).
SECRET_FLAGS = frozenset({"api-key"})


def describe(kind: str, old: str | None, new: str) -> list:
    """What changes from ``old`` to ``new`` (None: the file is new), said in short lines.
    ``kind`` config: each flag that changes, with both values (``SECRET_FLAGS``: that it
    changes); unit: the lines that change; secret: that it changes, never its values."""
    if old is None:
        return ["new"]
    if old == new:
        return []
    if kind == "secret":
        return ["values changed (not shown)"]
    if kind == "config":
        before, after = parse(old), parse(new)

        def show(key, value):
            return "(not shown)" if key in SECRET_FLAGS else _show(value)
        lines = []
        for key in sorted(set(before) | set(after)):
            if key not in after:
                lines.append("%s: %s -> removed" % (key, show(key, before[key])))
            elif key not in before:
                lines.append("%s: added %s" % (key, show(key, after[key])))
            elif before[key] != after[key]:
                lines.append("%s: changed (not shown)" % key if key in SECRET_FLAGS
                             else "%s: %s -> %s" % (key, _show(before[key]), _show(after[key])))
        return lines or ["comments changed"]
    gone = [line for line in old.splitlines() if line not in new.splitlines()]
    came = [line for line in new.splitlines() if line not in old.splitlines()]
    return ["- " + line for line in gone] + ["+ " + line for line in came] or ["order changed"]


def staged_changes(files: list, read) -> dict:
    """``files``: [{name, staged, live, kind}]; ``read(path)`` returns a file's text or None
    when it does not exist.  Returns the names whose live file differs from the staged one
    (or that is not staged), and the description of each."""
    details = {}
    for item in files:
        new = read(item["staged"])
        # (in check mode the staged file is only what a real run would write)
        lines = describe(item.get("kind", "unit"), read(item["live"]), new) if new is not None else ["not staged yet"]
        if lines:
            details[item["name"]] = lines
    return {"changed": [item["name"] for item in files if item["name"] in details], "details": details}
