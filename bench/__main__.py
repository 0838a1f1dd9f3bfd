"""``python -m bench``: run the suite (see :mod:`bench.suite`)."""

import sys

from bench.suite import main

sys.exit(main())
