"""``python -m tvmpy.cli ...``: the ``tvmpy`` command line (as ``python -m tvmpy``)."""

import sys

from . import main

sys.exit(main())
