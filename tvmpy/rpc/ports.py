"""Port arguments of the command lines (``tvmpy rpc server/tracker/status``, ``tvmpy tune
--tracker``): one check, so a port outside 0..65535 is a usage error everywhere instead of an
``OverflowError`` from ``bind`` or a number silently taken modulo 65536 further down."""

from __future__ import annotations

import argparse

__all__ = ["port", "host_port", "MAX_PORT"]

MAX_PORT = 65535


def _port_number(text: str, low: int) -> int:
    t = text.strip()
    if not t.isdigit() or not t.isascii():
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}")
    value = int(t)
    if not low <= value <= MAX_PORT:
        raise argparse.ArgumentTypeError(f"port {value} is out of range {low}..{MAX_PORT}")
    return value


def port(text: str) -> int:
    """argparse type of a port to listen on: 0..65535 (0: any free port)."""
    return _port_number(text, 0)


def host_port(text: str) -> str:
    """argparse type of ``HOST:PORT`` (a port to connect to: 1..65535); returned as given."""
    host, sep, number = text.rpartition(":")
    if not sep:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    _port_number(number, 1)
    return text
