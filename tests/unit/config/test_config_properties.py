"""Property tests (hypothesis): hostile inventories and playbooks either fail validation naming file and field,
or give launch lines that a shell splits into exactly the intended argv and environment, creating no file.

Generated: env names and values, profile names, flags (owned ones in every spelling, secrets, shell
metacharacters, command substitutions, NUL, newlines), paths. Each valid case is run through bash (as the
login shell over SSH runs it) with the host script replaced by one that prints its argv and sources the
environment file the way launch.sh does; the working directory must stay empty. Bounded: ``max_examples``
per test, no deadline; the case counts are asserted (>= 1,000 in all).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mtp_remote.config.inventory import load_inventory
from mtp_remote.config.playbook import load_playbook
from mtp_remote.config.validation import ENV_NAME
from mtp_remote.errors import ConfigError
from mtp_remote.remote import hostscripts
from mtp_remote.remote.commands import server_argv, server_env

EXAMPLES = 550
FIELDS = ("hosts.h.", "profiles.", "base_flags", "baseline", "default_host", "hosts")

_HOSTILE = ["a", "Z", "_", "0", "9", "-", ".", "=", ";", "|", "&", "$", "`", "'", '"', "\\", " ", "(", ")", "<",
            ">", "*", "?", "~", "\n", "\t", "#", "!", "{", "}", "%", "\x00", "é", "$(touch pwned)",
            "`touch pwned`", "; touch pwned;", "&& touch pwned", "> pwned", "$HOME", "${IFS}", "'\"'\"'",
            "--port=1", "--host", "--model-p", "--config", "--api-ke", "\r"]
hostile = st.lists(st.sampled_from(_HOSTILE), min_size=1, max_size=6).map("".join)
#: A valid-looking name with a line break after it or inside it: ``re.match(r"^...$")`` let "pwned\n" through.
_shell_name = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True)
_broken = st.sampled_from(["\n", "\r\n", "\r", "\n\n", "\nreboot", "\n$(touch pwned)"])
env_names = st.one_of(_shell_name, hostile, st.tuples(_shell_name, _broken).map("".join),
                      st.tuples(_shell_name, _broken, _shell_name).map("".join))
env_values = st.one_of(st.text(max_size=16), hostile)
_file_name = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,10}", fullmatch=True)
names = st.one_of(_file_name, hostile, st.tuples(_file_name, _broken).map("".join))
flag_tokens = st.one_of(
    st.sampled_from(["--tp-size", "2", "--api-key", "sk-secret", "--mem-fraction-static", "0.8", "--port=1",
                     "--po", "--host", "--ho=0.0.0.0", "--model-path", "--model", "--model-p=/x", "--config",
                     "--conf=c.yaml", "--reasoning-parser", "qwen3", "--speculative-algorithm", "NEXTN"]),
    hostile)
flags = st.lists(flag_tokens, max_size=6)
paths = st.one_of(st.sampled_from(["/tmp/wd", "/models/Qwen 3", "./m", "~/w"]), hostile.map(lambda s: "/x/" + s),
                  hostile)

#: launch.sh's own environment loader (the JSON file in, os.environ out, then exec), as the host runs it.
ENVLOAD = re.search(r"^envload='([^']*)'$", hostscripts.script_text("launch.sh"), re.MULTILINE).group(1)
#: Prints its argv (NUL-terminated words), a 0x01, then loads stdin with launch.sh's loader and prints the env.
#: The loader runs as launch.sh runs it (``-I``), under this interpreter: a bare ``python3`` may be a pyenv shim,
#: a bash script that took 3x the CPU of the loader itself (140 ms vs 47 ms a case, 1,100 cases).
CHECKER = ('for a in "$@"; do printf "%s\\0" "$a"; done; printf "\\001"; e=$(mktemp); cat > "$e"; '
           f'{shlex.quote(sys.executable)} -I -c {shlex.quote(ENVLOAD)} "$e" /usr/bin/env -0')


def _expect_named_error(e: ConfigError, path: Path) -> None:
    text = str(e)
    assert str(path) in text, text
    assert e.field or any(f in text for f in FIELDS), f"no field named in: {text}"


def _run_line(args: list, env: dict[str, str], cwd: Path, monkeypatch) -> None:
    monkeypatch.setattr(hostscripts, "script_text", lambda name: CHECKER)
    line = hostscripts.script_command("launch.sh", args)
    words = shlex.split(line)
    assert words == ["sh", "-c", CHECKER, "sh", *map(str, args)]
    r = subprocess.run(["bash", "-c", line], cwd=cwd, input=hostscripts.env_file_text(env).encode(),
                       capture_output=True, timeout=20, check=False)
    assert r.returncode == 0, r.stderr
    argv_part, _, env_part = r.stdout.partition(b"\x01")
    assert [w.decode() for w in argv_part.split(b"\0")[:-1]] == [str(a) for a in args]
    seen = dict(x.decode().split("=", 1) for x in env_part.split(b"\0") if b"=" in x)
    for k, v in env.items():
        assert seen.get(k) == v, (k, v, seen.get(k))
    assert os.listdir(cwd) == [], f"the launch line created files: {os.listdir(cwd)}"


def _check(inv_data: dict, pb_data: dict, counts: dict, monkeypatch) -> None:
    d = counts["dir"]
    inv_path, pb_path = d / "inventory.yaml", d / "playbook.yaml"
    inv_path.write_text(yaml.safe_dump(inv_data, allow_unicode=True))
    pb_path.write_text(yaml.safe_dump(pb_data, allow_unicode=True))
    counts["cases"] += 1
    try:
        host = load_inventory(inv_path).get(None)
    except ConfigError as e:
        _expect_named_error(e, inv_path)
        counts["refused"] += 1
        return
    try:
        pb = load_playbook(pb_path)
    except ConfigError as e:
        _expect_named_error(e, pb_path)
        counts["refused"] += 1
        return
    for k in list(host.env) + [k for p in pb.profiles.values() for k in p.env]:
        assert ENV_NAME.fullmatch(k)
    profile = pb.baseline
    argv = server_argv(host, pb, profile)
    env = server_env(host, pb, profile, host.workdir)
    assert argv[-4:] == ["--host", "127.0.0.1", "--port", str(host.port)]
    args = [host.workdir, f"{host.workdir}/logs/r1/{profile}.log", host.port, 10, host.python or "python3",
            host.engine_module, *argv]
    cwd = d / "cwd"
    cwd.mkdir(exist_ok=True)
    _run_line(args, env, cwd, monkeypatch)
    counts["launched"] += 1


SETTINGS = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


def test_hostile_inventories_are_refused_by_name_or_launch_exactly_as_written(monkeypatch, tmp_path):
    counts = {"cases": 0, "refused": 0, "launched": 0, "dir": tmp_path}

    @SETTINGS
    @given(env=st.dictionaries(env_names, env_values, max_size=4), workdir=paths, model=paths, python=paths,
           engine=st.sampled_from(["sim", "sglang"]))
    def one(env, workdir, model, python, engine):
        inv = {"default_host": "h", "hosts": {"h": {"transport": "local", "engine": engine, "workdir": workdir,
                                                      "model_path": model, "python": python, "env": env}}}
        pb = {"name": "p", "prompts": [{"id": "a", "text": "hi"}], "profiles": {"baseline": {}}}
        _check(inv, pb, counts, monkeypatch)

    one()
    print(f"inventories: { {k: v for k, v in counts.items() if k != 'dir'} }")
    assert counts["cases"] >= EXAMPLES and counts["refused"] > 50 and counts["launched"] > 50, counts


def test_hostile_playbooks_are_refused_by_name_or_launch_exactly_as_written(monkeypatch, tmp_path):
    counts = {"cases": 0, "refused": 0, "launched": 0, "dir": tmp_path}

    @SETTINGS
    @given(base=flags, prof_flags=flags, prof_env=st.dictionaries(env_names, env_values, max_size=3), name=names)
    def one(base, prof_flags, prof_env, name):
        inv = {"default_host": "h", "hosts": {"h": {"transport": "local", "engine": "sim", "workdir": "/tmp/w",
                                                      "env": {"HF_TOKEN": "hf_x'y"}}}}
        pb = {"name": "p", "prompts": [{"id": "a", "text": "hi"}], "base_flags": base, "baseline": name,
              "profiles": {name: {"flags": prof_flags, "env": prof_env}}}
        _check(inv, pb, counts, monkeypatch)

    one()
    print(f"playbooks: { {k: v for k, v in counts.items() if k != 'dir'} }")
    assert counts["cases"] >= EXAMPLES and counts["refused"] > 50 and counts["launched"] > 50, counts
