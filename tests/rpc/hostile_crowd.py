"""A crowd of hostile clients of an RPC server, for the soak test (test_rpc_dos.py):

    python hostile_crowd.py PORT SECONDS BOTS

keeps BOTS connections to 127.0.0.1:PORT open for SECONDS seconds, each bot one of: ``idle``
(connects, says nothing), ``garbage`` (random bytes), ``slow`` (a valid hello, one byte every
0.3 s), ``wrong`` (a hello with a wrong token, again and again), ``huge`` (a frame prefix
announcing 1 GiB). A bot the server drops reconnects after a short pause. Prints one JSON line
of counts at the end and exits by itself.
"""

from __future__ import annotations

import json
import os
import selectors
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from tvmpy.rpc.protocol import FrameReader, Limits, encode_frame, mac  # noqa: E402

KINDS = ("idle", "garbage", "slow", "wrong", "huge")
RECONNECT = 0.2


class Bot:
    def __init__(self, kind: str):
        self.kind = kind
        self.sock: socket.socket | None = None
        self.reader = FrameReader(Limits(65536, 0))
        self.out = b""
        self.next_send = 0.0
        self.retry_at = 0.0


def hello(nonce: bytes, wrong: bool) -> bytes:
    cnonce = os.urandom(32)
    return encode_frame({"proto": "tvmpy-rpc", "version": 1, "key": "", "session_timeout": 0,
                         "cnonce": cnonce.hex(),
                         "mac": mac("not-the-token-of-this-server", b"client", nonce, cnonce)
                         if wrong else None})


def main(port: int, seconds: float, n: int) -> None:
    sel = selectors.DefaultSelector()
    bots = [Bot(KINDS[i % len(KINDS)]) for i in range(n)]
    stats = {k: {"connects": 0, "dropped": 0} for k in KINDS}
    end = time.monotonic() + seconds

    def connect(b: Bot) -> None:
        b.sock = socket.socket()
        b.sock.setblocking(False)
        b.sock.connect_ex(("127.0.0.1", port))
        b.reader = FrameReader(Limits(65536, 0))
        b.out, b.next_send = b"", time.monotonic() + 0.05  # once connected
        sel.register(b.sock, selectors.EVENT_READ, b)
        stats[b.kind]["connects"] += 1

    def drop(b: Bot, now: float) -> None:
        if b.sock is not None:
            sel.unregister(b.sock)
            b.sock.close()
            b.sock = None
            stats[b.kind]["dropped"] += 1
        b.retry_at = now + RECONNECT

    for b in bots:
        connect(b)
    while time.monotonic() < end:
        now = time.monotonic()
        for key, _ in sel.select(0.05):
            b = key.data
            try:
                data = b.sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                data = b""
            if not data:
                drop(b, now)
                continue
            if b.kind not in ("slow", "wrong") or b.out:
                continue  # the others ignore what the server says
            try:  # the greeting: its nonce makes the hello
                frame = None
                while data and frame is None:
                    k = min(len(data), b.reader.wants())
                    frame, data = b.reader.feed(data[:k]), data[k:]
            except Exception:  # noqa: BLE001 - an error frame or garbage: drop it
                drop(b, now)
                continue
            if frame is not None:
                b.out = hello(bytes.fromhex(frame[0].get("nonce", "")), b.kind == "wrong")
        for b in bots:
            if b.sock is None:
                if now >= b.retry_at:
                    connect(b)
                continue
            if now < b.next_send:
                continue
            try:
                if b.kind == "garbage":
                    b.sock.send(os.urandom(512))
                    b.next_send = now + 0.2
                elif b.kind == "huge":
                    b.sock.send(b"TVRP" + (100).to_bytes(4, "big") + (1).to_bytes(4, "big")
                                + (1 << 30).to_bytes(8, "big"))
                    b.next_send = now + 1.0
                elif b.kind == "slow" and b.out:
                    b.sock.send(b.out[:1])
                    b.out, b.next_send = b.out[1:] or b"\0", now + 0.3
                elif b.kind == "wrong" and b.out:
                    b.sock.send(b.out)
                    b.out, b.next_send = b"\0", now + 3600  # then wait for the verdict
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                drop(b, now)
    for b in bots:
        if b.sock is not None:
            b.sock.close()
    print(json.dumps(stats), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]))
