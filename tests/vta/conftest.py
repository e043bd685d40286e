import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from vta_reference_queue import ReferenceQueue  # noqa: E402


@pytest.fixture(params=["sim", "ref"])
def vta_queue(request):
    """Run VTA modules on vta-hw's runtime + simulator ("sim") and on the functional
    reference queue of these tests ("ref", independent of vta-hw)."""
    from tvmpy.vta.build import use_command_queue

    if request.param == "sim":
        use_command_queue(None)
        yield "sim"
    else:
        use_command_queue(ReferenceQueue)
        yield "ref"
    use_command_queue(None)
