"""Many hosts at once (``fleet.py``) and the nightly job with its regression check (``nightly.py``,
``nightly_fleet.py``)."""
