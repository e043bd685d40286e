"""Test-wide settings.

Under CI (the CI environment variable set, as `.ci/run` runs) hypothesis is derandomized: every
run explores the same examples, so a submission's CI result does not depend on luck. Locally
each run explores new examples; a failure found there is replayed from .hypothesis/ and should
become an explicit regression test.
"""

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
