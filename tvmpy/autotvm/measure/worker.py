"""Entry point of a measurement worker started as a fresh interpreter (see workers.py).

``python -m tvmpy.autotvm.measure.worker CONN_FD DEATH_FD``: ``CONN_FD`` is this end of the
socket pair to the parent; ``DEATH_FD`` is held open (never written) so that the parent sees
the worker exit. The first message is ``(sys_path, handler, init, init_args)``; the worker
then runs :func:`workers.serve`. The user's ``__main__`` is never imported here.
"""

from __future__ import annotations

import multiprocessing.connection
import pickle
import sys


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m tvmpy.autotvm.measure.worker CONN_FD DEATH_FD", file=sys.stderr)
        return 2
    conn = multiprocessing.connection.Connection(int(argv[0]))
    _death_fd = int(argv[1])  # noqa: F841 - kept open until this process exits
    try:
        sys_path, handler, init, init_args = pickle.loads(conn.recv_bytes())
    except (EOFError, OSError):
        return 0  # the parent went away before sending the job
    sys.path[:] = [p for p in sys_path if p] + [p for p in sys.path if p not in sys_path]
    from .workers import serve

    serve(conn, handler, init, init_args)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
