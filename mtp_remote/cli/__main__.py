"""``python -m mtp_remote.cli``: the ``mtp-remote`` command line."""

import sys

from .main import main

sys.exit(main())
