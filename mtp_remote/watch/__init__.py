"""Live endpoints probed on an interval (``mtp-remote watch``): the probe (``probe.py``), the rounds, alerts and
exported metrics (``watch.py``), and the entry points' checked inputs (``setup.py``)."""
