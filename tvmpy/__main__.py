"""``python -m tvmpy ...``: the ``tvmpy`` command line (see tvmpy/cli/)."""

import sys

from .cli import main

sys.exit(main())
