import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from vta_reference_queue import ReferenceQueue  # noqa: E402


@pytest.fixture
def ref_queue():
    """Run VTA modules on the functional reference queue (independent of vta-hw)."""
    from tvmpy.vta.build import use_command_queue

    queues = []

    def make(env):
        q = ReferenceQueue(env)
        queues.append(q)
        return q
    use_command_queue(make)
    yield queues
    use_command_queue(None)
