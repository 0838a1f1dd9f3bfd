"""One diagnose run: plan, launch, sample, judge, write (the workflow in ``diagnose.py``, one host's part in
``runner.py``)."""
