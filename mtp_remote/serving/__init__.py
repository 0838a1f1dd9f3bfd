"""Where a server runs: the seam the runner drives (``base.py``: the ``ServerKind`` protocol and its values), one
module per kind (``process.py``: a process group on the host), and ``kinds.py`` choosing one from the inventory."""
