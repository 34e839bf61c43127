"""A client of NCCL's RAS service, as NCCL's own ``ncclras`` speaks to it (``src/ras/client.cc``; the server
side is ``rasClientEventLoop`` in ``src/ras/client_support.cc``).

The protocol is newline-terminated text over TCP, one reply line per command until the status:
``CLIENT PROTOCOL 2`` → ``SERVER PROTOCOL <n>``; ``TIMEOUT <seconds>`` → ``OK`` (how long RAS waits for the
other processes); ``SET FORMAT json`` → ``OK`` on NCCL 2.28.7 and later, ``ERROR: Unknown command ...`` before
(the protocol number is 2 in every release from 2.24 to 2.30, so the format is detected by asking, never by
version); then ``STATUS`` or ``VERBOSE STATUS``, whose answer runs until the server closes the connection.
The address is given as ``NCCL_RAS_ADDR`` is: ``<host>:<port>`` or ``[<IPv6>]:<port>``, by default
``localhost:28028``.

Every step is bounded: one deadline covers connecting, the handshake and the answer, a reply line is at most
1 KiB (``ncclras`` reads 1024 bytes) and the answer at most ``max_bytes``.

``RasClient`` is the poller's: it keeps the address it resolved (re-resolved after a failure and every
``RESOLVE_EVERY_S``) and, once a server answered JSON, sends the next poll's commands in one write. RAS reads
every complete line in its buffer in turn (``rasClientEventLoop``), so the replies come back in order as if each
had been awaited; a server that no longer takes ``SET FORMAT json`` then answers a (terse) text status, read as
such, and the next poll asks step by step again.
"""
from __future__ import annotations

import socket
import time
from dataclasses import dataclass

DEFAULT_PORT = 28028
DEFAULT_ADDRESS = f"localhost:{DEFAULT_PORT}"
PROTOCOL = 2
LINE_MAX = 1024
FORMATS = ("auto", "json", "text")
# RAS waits for a collective's legs up to its TIMEOUT, then up to 5 s more (RAS_COLLECTIVE_EXTRA_TIMEOUT_SEC).
RAS_EXTRA_TIMEOUT_S = 5
RESOLVE_EVERY_S = 300.0   # how long RasClient keeps a resolved address that keeps working


class RasError(Exception):
    """The RAS service could not be asked or gave no usable answer."""


class RasRefused(RasError):
    """Nothing listens on the address: no NCCL job with RAS on this node."""


class RasTimeout(RasError):
    """The service accepted the connection but did not answer in time."""


class RasProtocolError(RasError):
    """An unexpected reply, a refused command or an answer over the size limit."""


@dataclass(frozen=True, slots=True)
class RasAnswer:
    format: str         # json or text
    protocol: int       # as the server announced it
    body: str


def parse_address(value: str) -> tuple[str, int]:
    """``host:port`` or ``[IPv6]:port`` (NCCL_RAS_ADDR's form) → (host, port); ValueError when malformed."""
    text = value.strip()
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or not rest.startswith(":"):
            raise ValueError(f"{value!r}: expected [IPv6]:PORT")
        port = rest[1:]
    else:
        host, sep, port = text.rpartition(":")
        if not sep or ":" in host:
            raise ValueError(f"{value!r}: expected HOST:PORT (an IPv6 address in brackets)")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{value!r}: expected HOST:PORT with a port from 1 to 65535")
    return host, int(port)


class _Conn:
    """A socket read against one deadline."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock, self.deadline, self.buffer = sock, deadline, b""

    def _recv(self, size: int) -> bytes:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise RasTimeout("no answer before the deadline")
        self.sock.settimeout(left)
        try:
            return self.sock.recv(size)
        except socket.timeout:
            raise RasTimeout("no answer before the deadline") from None
        except OSError as exc:
            raise RasError(f"reading: {exc}") from None

    def send(self, line: str) -> None:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise RasTimeout("no answer before the deadline")
        self.sock.settimeout(left)
        try:
            self.sock.sendall(line.encode() + b"\n")
        except socket.timeout:
            raise RasTimeout("sending took past the deadline") from None
        except OSError as exc:
            raise RasError(f"sending {line.split()[0]}: {exc}") from None

    def line(self) -> str:
        """One reply line, without its newline."""
        while b"\n" not in self.buffer:
            if len(self.buffer) >= LINE_MAX:
                raise RasProtocolError(f"reply line longer than {LINE_MAX} bytes")
            data = self._recv(LINE_MAX - len(self.buffer))
            if not data:
                raise RasProtocolError("the server closed the connection")
            self.buffer += data
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.rstrip(b"\r").decode("ascii", errors="replace")

    def rest(self, max_bytes: int) -> bytes:
        """Everything until the server closes the connection."""
        chunks, size = [self.buffer], len(self.buffer)
        self.buffer = b""
        while True:
            data = self._recv(min(65536, max_bytes + 1 - size))
            if not data:
                return b"".join(chunks)
            size += len(data)
            if size > max_bytes:
                raise RasProtocolError(f"answer larger than {max_bytes} bytes")
            chunks.append(data)


Addresses = list[tuple]   # getaddrinfo's (family, type, proto, canonname, sockaddr)


def resolve(host: str, port: int) -> Addresses:
    try:
        return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise RasError(f"resolving {host}: {exc}") from None


def connect(host: str, port: int, deadline: float, infos: Addresses | None = None) -> socket.socket:
    """A connection to the first address of ``host`` (``infos``: as resolved before) that accepts; RasRefused
    when every one refuses."""
    if infos is None:
        infos = resolve(host, port)
    refused, error = 0, None
    for family, kind, proto, _, addr in infos:
        left = deadline - time.monotonic()
        if left <= 0:
            raise RasTimeout(f"connecting to {host}:{port} took past the deadline")
        sock = socket.socket(family, kind, proto)
        sock.settimeout(left)
        try:
            sock.connect(addr)
            return sock
        except ConnectionRefusedError:
            refused += 1
        except socket.timeout:
            error = RasTimeout(f"connecting to {host}:{port} took past the deadline")
        except OSError as exc:
            error = RasError(f"connecting to {host}:{port}: {exc}")
        sock.close()
    if refused and refused == len(infos):
        raise RasRefused(f"nothing listens on {host}:{port}")
    raise error or RasError(f"no address for {host}")


def query(host: str, port: int, *, timeout: float = 10.0, fmt: str = "auto", verbose: bool = True,
          max_bytes: int = 16 << 20) -> RasAnswer:
    """One status answer: JSON where the server offers it (``fmt`` auto or json), text otherwise (auto or text).

    RAS is asked to wait for other processes no longer than the deadline leaves room for. ``verbose`` asks a
    text answer for ``VERBOSE STATUS`` (more outliers named; a JSON answer is complete either way).
    """
    return RasClient(host, port, timeout=timeout, fmt=fmt, verbose=verbose, max_bytes=max_bytes).query()


class RasClient:
    """Asks one RAS address again and again (``query``), as ``query()`` does once; not thread-safe."""

    def __init__(self, host: str, port: int, *, timeout: float = 10.0, fmt: str = "auto", verbose: bool = True,
                 max_bytes: int = 16 << 20) -> None:
        if fmt not in FORMATS:
            raise ValueError(f"format {fmt!r}: expected one of {', '.join(FORMATS)}")
        self.host, self.port, self.timeout, self.fmt = host, port, timeout, fmt
        self.verbose, self.max_bytes = verbose, max_bytes
        self._infos: Addresses | None = None
        self._resolved_at = 0.0
        self.json_known = False     # the last answer was JSON: the next poll's commands go in one write

    def query(self) -> RasAnswer:
        deadline = time.monotonic() + self.timeout
        if self._infos is None or time.monotonic() - self._resolved_at > RESOLVE_EVERY_S:
            self._infos, self._resolved_at = resolve(self.host, self.port), time.monotonic()
        try:
            sock = connect(self.host, self.port, deadline, self._infos)
        except RasError:
            self._infos, self.json_known = None, False
            raise
        try:
            answer = self._ask(_Conn(sock, deadline))
        except RasError:
            self.json_known = False
            raise
        finally:
            sock.close()
        self.json_known = answer.format == "json"
        return answer

    def _ask(self, conn: _Conn) -> RasAnswer:
        # RAS gives up on a process after its TIMEOUT plus RAS_EXTRA_TIMEOUT_S; leave a second to send.
        commands = [f"CLIENT PROTOCOL {PROTOCOL}", f"TIMEOUT {max(1, int(self.timeout) - RAS_EXTRA_TIMEOUT_S - 1)}"]
        pipelined = self.json_known and self.fmt in ("auto", "json")
        if pipelined:
            conn.send("\n".join((*commands, "SET FORMAT json", "STATUS")))
        else:
            conn.send(commands[0])
        protocol = _handshake(conn.line())
        if not pipelined:
            conn.send(commands[1])
        if (reply := conn.line()).upper() != "OK":
            raise RasProtocolError(f"TIMEOUT refused: {reply[:80]!r}")
        used = "text"
        if self.fmt in ("auto", "json"):
            if not pipelined:
                conn.send("SET FORMAT json")
            reply = conn.line()
            if reply.upper() == "OK":
                used = "json"
            elif self.fmt == "json" or not reply.upper().startswith("ERROR"):
                raise RasProtocolError(f"SET FORMAT json refused: {reply[:80]!r}")
        if not pipelined:
            conn.send("VERBOSE STATUS" if self.verbose and used == "text" else "STATUS")
        body = conn.rest(self.max_bytes)
        if not body:
            raise RasProtocolError("empty status answer")
        return RasAnswer(used, protocol, body.decode("utf-8", errors="replace"))


def _handshake(reply: str) -> int:
    if not reply.upper().startswith("SERVER PROTOCOL "):
        raise RasProtocolError(f"unexpected handshake reply {reply[:80]!r}")
    try:
        return int(reply[len("SERVER PROTOCOL "):].strip())
    except ValueError:
        raise RasProtocolError(f"unexpected handshake reply {reply[:80]!r}") from None
