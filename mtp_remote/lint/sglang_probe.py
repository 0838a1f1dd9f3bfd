"""Standalone probe run by *another* Python (a host's, or a throwaway venv's) that has SGLang installed.

It imports nothing from mtp_remote, only the standard library and SGLang, so its source can be piped to any
interpreter (``python - MODE [ARGV_JSON] < sglang_probe.py``). It builds SGLang's own launch parser the way
``sglang.srt.server_args.prepare_server_args`` does (``argparse.ArgumentParser`` +
``ServerArgs.add_cli_args``) and prints one line ``MTP_PROBE_JSON: {...}`` on stdout:

* ``dump``  -> ``{"sglang_version", "python", "actions": [{"option_strings", "dest", "action", "nargs",
  "const", "default", "type", "choices", "required"}]}`` — the flag table, as data.
* ``parse`` -> ``{"sglang_version", "ok": true, "flags": {dest: value}}`` or ``{"ok": false, "error": msg,
  "option_strings": [...]}`` where ``msg`` is argparse's own message (``unrecognized arguments: ...``,
  ``ambiguous option: ...``, ``argument --x: invalid int value: ...``).
* ``parse-many`` (ARGV_JSON is a list of argvs) -> ``{"sglang_version", "results": [<parse answer>, ...]}``:
  one interpreter start (~2 s of imports) for many command lines.

Exit status 3 with ``{"error": "sglang not importable: ..."}`` when SGLang cannot be imported.
"""

import argparse
import json
import sys

MARKER = "MTP_PROBE_JSON: "

_ACTION_NAMES = {
    "_StoreAction": "store", "_StoreTrueAction": "store_true", "_StoreFalseAction": "store_false",
    "_StoreConstAction": "store_const", "_AppendAction": "append", "_AppendConstAction": "append_const",
    "_CountAction": "count", "_HelpAction": "help", "_VersionAction": "version",
    "BooleanOptionalAction": "boolean_optional", "_ExtendAction": "extend",
}


class _ParseError(Exception):
    pass


def _emit(obj, status=0):
    sys.stdout.write(MARKER + json.dumps(obj, default=repr) + "\n")
    sys.stdout.flush()
    sys.exit(status)


def _jsonable(value):
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        if isinstance(value, (set, frozenset, tuple)):
            return [_jsonable(v) for v in value]
        return repr(value)


def _type_name(t):
    if t is None:
        return None
    return getattr(t, "__name__", None) or type(t).__name__


def _build_parser():
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    return parser


def _version():
    try:
        from importlib.metadata import version

        return version("sglang")
    except Exception:  # noqa: BLE001 - best effort, the probe must still answer
        import sglang

        return getattr(sglang, "__version__", None)


def _dump(parser):
    actions = []
    for a in parser._actions:
        cls = type(a).__name__
        choices = None if a.choices is None else sorted(_jsonable(list(a.choices)), key=str)
        actions.append({
            "option_strings": list(a.option_strings), "dest": a.dest,
            "action": _ACTION_NAMES.get(cls, cls), "nargs": a.nargs, "const": _jsonable(a.const),
            "default": _jsonable(a.default), "type": _type_name(a.type), "choices": choices,
            "required": bool(a.required),
        })
        if hasattr(a, "const_value"):  # SGLang's DeprecatedStoreConstAction stores this, not its value
            actions[-1]["const_value"] = _jsonable(a.const_value)
    return actions


def main(argv):
    mode = argv[0] if argv else "dump"
    try:
        parser = _build_parser()
    except Exception as exc:  # noqa: BLE001 - any import failure means "no usable SGLang"
        _emit({"error": f"sglang not importable: {type(exc).__name__}: {exc}"}, status=3)
    info = {"sglang_version": _version(), "python": sys.version.split()[0]}
    if mode == "dump":
        info["actions"] = _dump(parser)
        _emit(info)
    payload = json.loads(argv[1]) if len(argv) > 1 else []
    if mode == "parse-many":
        info["results"] = [_parse_one(parser, a) for a in payload]
        _emit(info)
    info.update(_parse_one(parser, payload))
    _emit(info)


def _parse_one(parser, launch_argv):
    def _error(message):
        raise _ParseError(message)

    parser.error = _error
    try:
        ns = parser.parse_args(launch_argv)
    except _ParseError as exc:
        opts = sorted({o for a in parser._actions for o in a.option_strings})
        return {"ok": False, "error": str(exc), "option_strings": opts}
    except SystemExit as exc:  # -h / --version
        return {"ok": False, "error": f"parser exited ({exc.code})", "option_strings": []}
    return {"ok": True, "flags": {k: _jsonable(v) for k, v in vars(ns).items()}}


if __name__ == "__main__":
    main(sys.argv[1:])
