"""The operator's host commands: preflight, status, stop, launch, logs, smoke (``ops.py``)."""
