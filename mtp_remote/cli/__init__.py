"""The entry points: the ``mtp-remote`` click command line (``main.py``) and the Fabric tasks (``tasks.py``),
both thin."""
