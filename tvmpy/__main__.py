"""``python -m tvmpy ...``: the ``tvmpy`` command line (see tvmpy/cli.py)."""

import sys

from .cli import main

sys.exit(main())
