"""The command layer: each command of ``mtp-remote`` and ``fab`` is one function here, typed arguments in
(:mod:`mtp_remote.commands.args`) and a typed result out; nothing is printed. The click commands and the Fabric
tasks (``cli/``) are adapters over it: options → arguments, the result rendered (``cli/render.py``), an exit
code. The configuration is read once per command (:func:`mtp_remote.config.loaded.as_loaded`)."""
