"""Who gets a session: the server's token, its handshake with clients not yet authenticated, and
its limit on failed authentications.

The listener (server.py) accepts every connection at once and hands it to a :class:`Gate`,
which greets it and reads its answer without blocking, in the listener's own loop:

- the *whole* handshake has a deadline (``handshake_timeout``), not each read, so a client that
  sends one byte every few seconds is dropped when it expires;
- at most ``max_pending`` connections (default 1024, a few KiB each) are in handshake at once;
  a new one pushes out the oldest (the slowest: they all have the same deadline) instead of
  being refused, so idle sockets cannot lock a legitimate client out (a flood of more than
  ``max_pending`` connections still serves a client whose handshake completes before that many
  newer connections arrive);
- no session process exists before a client has proved the token (HMAC, compared in constant
  time); authenticated clients wait in a queue of ``max_queue`` for a session slot, at most
  ``queue_timeout`` seconds;
- failed authentications are counted per peer address (:class:`AuthLimiter`): past a few, each
  further failure from that address is answered only after a delay that doubles. A correct
  answer is never delayed, so clients sharing the address (every local user of a loopback
  server) are not locked out by someone guessing. This slows guessing and keeps the log
  readable; it is no substitute for a strong token (an attacker with many connections still
  learns a verdict per connection), hence the 256-bit generated token and the refusal of weak
  ones.

Tokens: :func:`check_token` refuses short or patterned ones; :func:`resolve_token` picks the
token of ``--token``, ``--token-file`` or ``$TVMPY_RPC_TOKEN`` (the server generates one when
none is given).
"""

from __future__ import annotations

import collections
import math
import os
import secrets
import selectors
import socket
import stat
from collections.abc import Callable
from typing import Any

from .protocol import (
    PROTOCOL,
    VERSION,
    AuthenticationError,
    FrameReader,
    Limits,
    ProtocolError,
    RPCError,
    encode_frame,
    error_header,
    mac,
    same_secret,
)

__all__ = ["Gate", "Client", "AuthLimiter", "Policy", "TOKEN_ENV", "MIN_TOKEN_CHARS",
           "check_token", "generate_token", "read_token_file", "resolve_token"]

TOKEN_ENV = "TVMPY_RPC_TOKEN"
MIN_TOKEN_CHARS = 16
_HELLO_LIMITS = Limits(max_header=4096, max_payload=0, max_payloads=0)  # a hello: ~300 bytes


# ---- tokens ------------------------------------------------------------------------------------
def generate_token() -> str:
    """A random token (256 bits, URL-safe), as Jupyter generates one; never starting with
    ``-`` (1 in 64 would), which a command line would read as an option (``--token -x...``)."""
    while True:
        token = secrets.token_urlsafe(32)
        if not token.startswith("-"):
            return token


def check_token(token: str) -> str:
    """``token`` if it is long and varied enough, else ValueError saying why. This refuses
    obviously weak tokens (short, few distinct characters, a repeated pattern, a run such as
    ``abcdef...``); it cannot tell a random token from a memorable one."""
    hint = ("use a random one: omit the token to have the server generate one, or "
            "`python -c 'import secrets; print(secrets.token_hex(32))'`")
    if not isinstance(token, str) or not token:
        raise ValueError(f"empty token: {hint}")
    if len(token) < MIN_TOKEN_CHARS:
        raise ValueError(f"token too short ({len(token)} characters, at least "
                         f"{MIN_TOKEN_CHARS}): {hint}")
    counts = collections.Counter(token)
    bits = -sum(c * math.log2(c / len(token)) for c in counts.values())
    steps = sum(abs(ord(a) - ord(b)) <= 1 for a, b in zip(token, token[1:]))
    period = next((p for p in range(1, len(token) // 2 + 1)
                   if all(token[i] == token[i % p] for i in range(len(token)))), None)
    if len(counts) < 8 or bits < 64 or period is not None or steps * 2 > len(token):
        raise ValueError(f"token too weak (few distinct characters, a repeated pattern or a "
                         f"run of consecutive characters): {hint}")
    return token


def read_token_file(path: str) -> str:
    """The token in ``path`` (surrounding whitespace removed); the file must be readable by its
    owner only (``chmod 600``), as ssh requires of keys."""
    try:
        with open(path, encoding="utf-8") as f:
            st = os.fstat(f.fileno())
            text = f.read(4096)
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"--token-file {path}: cannot read it: {e}") from None
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ValueError(f"--token-file {path}: readable by other users (mode "
                         f"{stat.S_IMODE(st.st_mode):o}): chmod 600 {path}")
    return text.strip()


def resolve_token(token: str | None, token_file: str | None, insecure_no_token: bool,
                  environ: Any = None) -> str | None:
    """The token given to the server: ``token`` (``--token``), else the file's
    (``--token-file``), else ``$TVMPY_RPC_TOKEN``; checked with :func:`check_token`. None when
    none is given (the server then generates one, unless ``insecure_no_token``)."""
    env = os.environ if environ is None else environ
    if token is not None and token_file is not None:
        raise ValueError("give the token once: --token or --token-file")
    if token_file is not None:
        token = read_token_file(token_file)
    if token is None:
        token = env.get(TOKEN_ENV) or None
    if insecure_no_token:
        if token is not None:
            raise ValueError(f"--insecure-no-token, yet a token is given (--token, --token-file "
                             f"or ${TOKEN_ENV}): choose one")
        return None
    return None if token is None else check_token(token)


# ---- failed authentications --------------------------------------------------------------------
class AuthLimiter:
    """Failed authentications per peer address. The first ``free`` failures (forgotten after
    ``forget_after`` quiet seconds) are answered at once; the n-th further one after
    ``base_delay * 2**n`` seconds, at most ``max_delay``. At most ``max_peers`` addresses are
    remembered (the least recent forgotten first)."""

    def __init__(self, free: int = 5, base_delay: float = 0.5, max_delay: float = 10.0,
                 forget_after: float = 60.0, max_peers: int = 4096):
        self.free, self.base_delay, self.max_delay = free, base_delay, max_delay
        self.forget_after, self.max_peers = forget_after, max_peers
        self._peers: collections.OrderedDict[str, tuple[int, float]] = collections.OrderedDict()

    def failure(self, peer: str, now: float) -> tuple[int, float]:
        """Record a failure of ``peer``: ``(failures so far, delay before answering it)``."""
        n, last = self._peers.pop(peer, (0, now))
        n = 1 if now - last > self.forget_after else n + 1
        self._peers[peer] = (n, now)
        while len(self._peers) > self.max_peers:
            self._peers.popitem(last=False)
        if n <= self.free:
            return n, 0.0
        return n, min(self.max_delay, self.base_delay * 2.0 ** min(n - self.free - 1, 64))


# ---- the handshake -----------------------------------------------------------------------------
class Policy:
    """How many clients the server takes and how long it waits for each:

    ``max_sessions`` run at once (each its own process); ``max_pending`` connections in
    handshake, each bounded by ``handshake_timeout`` seconds in all; ``max_queue``
    authenticated clients wait at most ``queue_timeout`` s for a session; a session ends after
    ``idle_timeout`` s without a request (0: never) or when a request frame takes longer than
    ``frame_timeout`` s (plus 1 s per MiB of payload) to arrive whole."""

    def __init__(self, max_sessions: int = 1, max_pending: int = 1024, max_queue: int = 16,
                 handshake_timeout: float = 10.0, queue_timeout: float = 60.0,
                 idle_timeout: float = 300.0, frame_timeout: float = 60.0):
        for name, v in (("max_sessions", max_sessions), ("max_pending", max_pending),
                        ("max_queue", max_queue)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be an int >= 1, got {v!r}")
        for name, t in (("handshake_timeout", handshake_timeout),
                        ("queue_timeout", queue_timeout), ("frame_timeout", frame_timeout)):
            if not t > 0 or not math.isfinite(t):
                raise ValueError(f"{name} must be > 0 seconds, got {t!r}")
        if not idle_timeout >= 0 or not math.isfinite(idle_timeout):
            raise ValueError(f"idle_timeout must be >= 0 seconds (0: none), got {idle_timeout!r}")
        self.max_sessions, self.max_pending, self.max_queue = max_sessions, max_pending, max_queue
        self.handshake_timeout, self.queue_timeout = float(handshake_timeout), float(queue_timeout)
        self.idle_timeout, self.frame_timeout = float(idle_timeout), float(frame_timeout)


class Client:
    """A connection the gate holds: in handshake (``"hello"``), answered late after a failed
    authentication (``"held"``), or authenticated and waiting for a session (``"queued"``)."""

    __slots__ = ("sock", "peer", "deadline", "state", "reader", "nonce", "proof",
                 "session_timeout", "answer")

    def __init__(self, sock: socket.socket, peer: str, deadline: float):
        self.sock, self.peer, self.deadline = sock, peer, deadline
        self.state = "hello"
        self.reader = FrameReader(_HELLO_LIMITS)
        self.nonce = secrets.token_bytes(32)
        self.proof: str | None = None
        self.session_timeout = 0.0
        self.answer: BaseException | None = None  # "held": the error it gets at its deadline


class Gate:
    """The connections of a server that have no session yet (see the module docstring). The
    listener registers its own sockets on :attr:`sel` with ``data`` other than a Client."""

    def __init__(self, key: str, token: str | None, limits: Limits, policy: Policy,
                 log: Callable[[str], None], limiter: AuthLimiter | None = None):
        self.key, self.token, self.limits, self.policy = key, token, limits, policy
        self.log = log
        self.limiter = limiter or AuthLimiter()
        self.sel = selectors.DefaultSelector()
        self.pending: dict[int, Client] = {}  # insertion order: oldest first
        self.queue: collections.deque[Client] = collections.deque()

    # -- connections in --
    def add(self, sock: socket.socket, peer: str, now: float) -> None:
        """Greet a new connection (and push out the oldest pending one when full)."""
        while len(self.pending) >= self.policy.max_pending:
            self.evict_oldest("server busy: too many connections in handshake (this one was "
                              "the oldest)")
        sock.setblocking(False)
        c = Client(sock, peer, now + self.policy.handshake_timeout)
        greeting = encode_frame({"proto": PROTOCOL, "version": VERSION, "key": self.key,
                                 "auth": bool(self.token), "nonce": c.nonce.hex(),
                                 "max_header": self.limits.max_header,
                                 "max_payload": self.limits.max_payload})
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if sock.send(greeting) != len(greeting):  # a fresh socket's buffer takes it whole
                raise OSError("greeting not sent whole")
            self.sel.register(sock, selectors.EVENT_READ, c)
        except OSError:
            sock.close()
            return
        self.pending[sock.fileno()] = c

    def evict_oldest(self, message: str) -> bool:
        if not self.pending:
            return False
        self._drop(next(iter(self.pending.values())), RuntimeError(message))
        return True

    def readable(self, c: Client, now: float) -> None:
        """Data (or EOF) from ``c``."""
        if c.state != "hello":  # held or queued: it should say nothing until answered
            try:
                data = c.sock.recv(1, socket.MSG_PEEK)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                data = b""
            self._drop(c, ProtocolError("the client spoke before the handshake's answer")
                       if data else None)
            return
        try:
            data = c.sock.recv(min(c.reader.wants(), 65536))
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._drop(c, None)
            return
        try:
            frame = c.reader.feed(data)
            if frame is not None:
                self._hello(c, frame[0], now)
        except (ProtocolError, AuthenticationError) as e:
            self._drop(c, e)
        except Exception as e:  # noqa: BLE001 - a bug must cost one client, not the server
            self.log(f"internal error in a handshake with {c.peer}: {type(e).__name__}: {e}")
            self._drop(c, RPCError("internal server error in the handshake"))

    def _hello(self, c: Client, hello: dict, now: float) -> None:
        if hello.get("proto") != PROTOCOL:
            raise ProtocolError("the client did not answer the greeting with the tvmpy-rpc "
                                "handshake")
        if hello.get("version") != VERSION:
            raise ProtocolError(f"the client speaks protocol version {hello.get('version')!r}, "
                                f"this server {VERSION}")
        ckey = hello.get("key") or ""
        if ckey and self.key and ckey != self.key:
            raise AuthenticationError(f"key mismatch: this server serves key {self.key!r}, "
                                      f"the client asked for {ckey!r}")
        try:
            cnonce = bytes.fromhex(str(hello.get("cnonce", "")))
        except ValueError:
            raise ProtocolError("bad client nonce") from None
        timeout = hello.get("session_timeout") or 0
        if (not isinstance(timeout, (int, float)) or isinstance(timeout, bool)
                or not 0 <= timeout <= 1e8):
            raise ProtocolError(f"bad session_timeout {timeout!r}")
        if self.token:
            answer = hello.get("mac")
            if not answer:
                raise AuthenticationError("this server requires a token: connect with token=...")
            if not same_secret(str(answer), mac(self.token, b"client", c.nonce, cnonce)):
                self._failed(c, now)
                return
            c.proof = mac(self.token, b"server", cnonce, c.nonce)
        c.session_timeout = float(timeout)
        del self.pending[c.sock.fileno()]
        if len(self.queue) >= self.policy.max_queue:
            self._close(c, RuntimeError(f"server busy: {len(self.queue)} clients are already "
                                        "waiting for a session"))
            return
        c.state, c.deadline = "queued", now + self.policy.queue_timeout
        self.queue.append(c)

    def _failed(self, c: Client, now: float) -> None:
        n, delay = self.limiter.failure(c.peer, now)
        if n <= self.limiter.free or n & (n - 1) == 0:  # no flood of log lines under attack
            self.log(f"authentication failed from {c.peer} ({n} in a row"
                     + (f"; answers delayed {delay:g} s)" if delay else ")"))
        err = AuthenticationError("authentication failed: wrong token")
        if delay <= 0:
            self._drop(c, err)
            return
        c.state, c.deadline, c.answer = "held", now + delay, err

    # -- time --
    def expire(self, now: float) -> None:
        """Answer held failures and drop handshakes and waits past their deadline."""
        for c in [c for c in self.pending.values() if c.deadline <= now]:
            if c.state == "held":
                self._drop(c, c.answer)
            else:
                self._drop(c, TimeoutError(f"handshake not completed within "
                                           f"{self.policy.handshake_timeout:g} s"))
        while self.queue and self.queue[0].deadline <= now:
            self._close(self.queue.popleft(), RuntimeError(
                f"server busy: no session slot became free within "
                f"{self.policy.queue_timeout:g} s ({self.policy.max_sessions} running)"))

    def next_deadline(self) -> float | None:
        times = [c.deadline for c in self.pending.values()]
        if self.queue:
            times.append(self.queue[0].deadline)
        return min(times) if times else None

    # -- out --
    def next_authenticated(self) -> Client | None:
        """The authenticated client that waited longest (no longer held by the gate)."""
        while self.queue:
            c = self.queue.popleft()
            try:
                self.sel.unregister(c.sock)
            except (KeyError, ValueError):
                pass
            if c.sock.fileno() >= 0:
                return c
        return None

    def refuse(self, c: Client, message: str) -> None:
        """Answer an authenticated client that cannot get its session, and close it."""
        self._close(c, RuntimeError(message))

    def close_all(self, message: str) -> None:
        for c in list(self.pending.values()) + list(self.queue):
            self._close(c, RPCError(message))
        self.pending.clear()
        self.queue.clear()

    def close_in_child(self) -> None:
        """In a session process: close every other client's socket (their peers must see the
        listener's answers, not a copy kept open here) and the selector."""
        for c in list(self.pending.values()) + list(self.queue):
            c.sock.close()
        self.sel.close()

    def _drop(self, c: Client, err: BaseException | None) -> None:
        self.pending.pop(c.sock.fileno(), None)
        try:
            self.queue.remove(c)
        except ValueError:
            pass
        self._close(c, err)

    def _close(self, c: Client, err: BaseException | None) -> None:
        try:
            self.sel.unregister(c.sock)
        except (KeyError, ValueError):
            pass
        if err is not None:
            try:  # best effort: a small frame into an empty socket buffer, never blocking
                c.sock.send(encode_frame(error_header(err)))
            except OSError:
                pass
        c.sock.close()
