"""The run's records as types: a sample (a line of ``samples.jsonl``), the run summary (``summary.json``), the
searches' documents (``mitigation.json``, ``bisect.json``) and ``run.json``, as pydantic models that read and write
the existing versioned JSON. Old runs stay readable: every field a later version added has a default, and
fields a reader does not know are kept as they are and written back in place.

Low in the layering (pydantic only, beside ``analysis/``): ``report/``, ``runs/``, ``experiment/`` and the
workflows read typed records; nothing here imports them.
"""
