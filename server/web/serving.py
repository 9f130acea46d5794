"""`empeval serve`'s production server: waitress processes that read each request whole before a thread takes it.

A slow or idle client must cost a file descriptor, not a worker. Gunicorn's gthread workers hand a connection to a
thread as soon as it is readable, so a client that sends half a request line and stops holds that thread until it
times out (issue 29: 16 such sockets made 30 of 30 real calls time out against two workers). Waitress reads every
request, headers and body, in its asynchronous I/O loop and hands it to a thread only once it is complete, which is
the property we need; it runs in-process (nothing else to start, stop or configure) and is pure Python.

On top of waitress, each process (`GuardedServer`) adds what its own timeouts do not give:
- a deadline for a whole request from its first byte (`request_timeout`): waitress's `channel_timeout` is an
  inactivity timeout, which a client trickling a byte a second never meets;
- a cap on the connections one client address holds in each process (`per_address`), refused in the accept path,
  so one address cannot take the process's connection budget (`max_connections`) from everyone else;
- a drain on SIGTERM/SIGINT: stop accepting, finish the requests in flight (at most `grace` seconds), exit;
- an exit of its own when the supervisor is gone.
The idle keep-alive timeout is waitress's `channel_timeout` (`idle_timeout`).

`run` binds one listening socket and forks `processes` children that share it (each with `threads` threads), after
the app was built once in the supervisor (as gunicorn's --preload: a bad configuration stops `serve` before any
child starts, and a child that dies is replaced by a fork in milliseconds). The supervisor restarts a child that
dies and stops every child on SIGTERM or SIGINT.
"""
from __future__ import annotations

import logging
import os
import resource
import signal
import socket
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.parser import HTTPRequestParser
from waitress.server import TcpWSGIServer
from waitress.task import ThreadedTaskDispatcher

from empeval.server.errors import BadInput

# How often (seconds) a worker's threads hand the GIL over; Python's default is 5 ms. A thread that holds SQLite's
# write lock gives the GIL up at each statement and must wait to get it back: while other threads of the worker
# run Python for up to a full interval each, every writer of every worker waits behind it. At 0.5 ms the lock is
# held about half as long at the 90th percentile and a worker of 8 threads stores about 40% more submissions per
# second (measured in one process with benchmarks' threads; the trivial endpoint is served with the same setting).
WORKER_SWITCH_INTERVAL_S = 0.0005

# Threads per process. A slow client no longer holds one (its request reaches a thread only once whole), so threads
# are for requests that wait inside the app: a writer queued behind SQLite's lock, a chat turn waiting for its model.
# Eight, not four, since group commit (store.group_commit): a batch holds the writes the process's threads have
# queued, so four threads made batches of at most four; with eight, 4,000 simulated raters with think time were
# answered at p99 113 ms instead of 931 (benchmarks/annotation_load.py --parts think, 2026-12-03, load 7-9).
DEFAULT_THREADS = 8
# A request's headers and body must arrive within this many seconds of its first byte: a submission is a few KB
# (at most MAX_CONTENT_LENGTH, 1 MB by default), which even a poor mobile link sends in a few seconds.
DEFAULT_REQUEST_TIMEOUT_S = 30.0
# A connection with no request in progress (an idle keep-alive connection, or one that never sent a byte) is closed
# after this many seconds of silence. The task page asks again every 30-90 s; a browser reopens a closed connection.
DEFAULT_IDLE_TIMEOUT_S = 20.0
# Open connections one client address may hold in each process. A browser opens at most 6 per host; 64 leaves room
# for a lab behind one NAT address. Not applied behind a proxy (--proxies): every connection then comes from it.
DEFAULT_PER_ADDRESS = 64
# Open connections per process (waitress's default is 100). Each costs a descriptor and a few KB, not a thread.
DEFAULT_MAX_CONNECTIONS = 1000
# Seconds a stopping process waits for the requests in flight before it exits anyway.
DEFAULT_GRACE_S = 10.0
# A child that fails before serving exits with this code: the supervisor then stops instead of restarting it.
BOOT_FAILED = 3

REFUSED_ANSWER = (b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Type: text/plain\r\n"
                  b"Retry-After: 5\r\nContent-Length: 41\r\n\r\ntoo many connections from your address.\r\n")
log = logging.getLogger("empeval.serve")


def default_processes() -> int:
    """One process per CPU core this process may run on (its affinity, not the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class ServeOptions:
    """How `run` serves: processes and threads, the slow-client limits, the proxies in front. A `per_address` of 0
    and a timeout of 0 turn that limit off."""

    processes: int
    threads: int = DEFAULT_THREADS
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT_S
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT_S
    per_address: int = DEFAULT_PER_ADDRESS
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    proxies: int = 0
    grace: float = DEFAULT_GRACE_S
    backlog: int = 2048

    def describe(self) -> str:
        per_address = f"{self.per_address} per address" if self.per_address else "no per-address cap"
        return (f"{self.processes} process(es) x {self.threads} thread(s); requests must arrive whole within "
                f"{self.request_timeout:g} s, idle connections closed after {self.idle_timeout:g} s, "
                f"{per_address}, {self.max_connections} connections per process")


# --- one process ------------------------------------------------------------------------------------------------


class TimedRequest(HTTPRequestParser):
    """Waitress's request parser, created at a request's first byte, remembering when."""

    def __init__(self, adj: Adjustments):
        super().__init__(adj)
        self.started = time.monotonic()


class GuardedChannel(HTTPChannel):
    """A connection: its requests timed from their first byte, its client address counted by the server."""

    parser_class = TimedRequest
    server: GuardedServer

    def __init__(self, server: GuardedServer, sock: socket.socket, addr: Any, adj: Adjustments, map: Any = None):
        super().__init__(server, sock, addr, adj, map=map)
        self.client_address = str(addr[0])
        server.by_address[self.client_address] += 1
        self._counted = True

    def del_channel(self, map: Any = None) -> None:
        super().del_channel(map)
        if getattr(self, "_counted", False):
            self._counted = False
            counts = self.server.by_address
            counts[self.client_address] -= 1
            if counts[self.client_address] <= 0:
                del counts[self.client_address]


class GuardedServer(TcpWSGIServer):
    """Waitress's server on an inherited listening socket, with the request deadline, the per-address cap, the
    drain on stop and the exit when the supervisor is gone (see the module's docstring)."""

    channel_class = GuardedChannel

    def __init__(self, app: Any, sock: socket.socket, options: ServeOptions, adj: Adjustments, *,
                 parent_pid: int | None = None):
        self.options, self.parent_pid = options, parent_pid
        self.by_address: Counter[str] = Counter()
        self.refused, self.refused_logged_at = 0, time.monotonic()
        self.stop_requested, self.draining_since = False, 0.0
        dispatcher = ThreadedTaskDispatcher()
        dispatcher.set_thread_count(adj.threads)
        super().__init__(app, map={}, _sock=sock, dispatcher=dispatcher, adj=adj, bind_socket=False,
                         sockinfo=(sock.family, sock.type, sock.proto, sock.getsockname()))

    def request_stop(self) -> None:
        """Drain and exit (safe from a signal handler: it only sets a flag and wakes the loop)."""
        self.stop_requested = True
        self.pull_trigger()

    def handle_accept(self) -> None:
        try:
            accepted = self.accept()
            if accepted is None:
                return
            conn, addr = accepted
            self.set_socket_options(conn)
        except OSError:
            return  # the client left before we got to it
        cap = self.options.per_address
        if cap and self.by_address[str(addr[0])] >= cap:
            self.refused += 1
            try:
                conn.setblocking(False)
                conn.send(REFUSED_ANSWER)
            except OSError:
                pass
            conn.close()
            return
        self.channel_class(self, conn, addr, self.adj, map=self._map)

    def readable(self) -> bool:
        if self.stop_requested:
            self._drain()
        return bool(super().readable())

    def maintenance(self, now: float) -> None:
        super().maintenance(now)  # waitress: idle connections (channel_timeout)
        if self.options.request_timeout:
            cutoff = time.monotonic() - self.options.request_timeout
            for channel in self.active_channels.values():
                request = channel.request
                # (a request being served is the app's; only one still arriving is the client's)
                if request is not None and not channel.requests and getattr(request, "started", cutoff) < cutoff:
                    channel.will_close = True
        if self.refused and time.monotonic() - self.refused_logged_at > 60:
            log.warning("refused %d connection(s) over the cap of %d per client address", self.refused,
                        self.options.per_address)
            self.refused, self.refused_logged_at = 0, time.monotonic()
        if self.parent_pid is not None and os.getppid() != self.parent_pid:
            self.stop_requested = True  # the supervisor is gone: nobody would restart or stop us

    def _drain(self) -> None:
        if not self.draining_since:
            self.draining_since = time.monotonic()
            self.accepting = False  # the other processes (or the next `serve`) take new connections
        busy = False
        for channel in list(self.active_channels.values()):
            if channel.requests or channel.total_outbufs_len:
                busy = True
            else:
                channel.will_close = True
        if not busy or time.monotonic() - self.draining_since > self.options.grace:
            raise SystemExit(0)  # waitress's run() ends the loop and its threads


def waitress_adjustments(app: Any, sock: socket.socket, options: ServeOptions) -> Adjustments:
    """Waitress's settings for `options` on `sock`, the body limit taken from the app's MAX_CONTENT_LENGTH."""
    max_body = int(getattr(app, "config", {}).get("MAX_CONTENT_LENGTH") or 1 << 20)
    return Adjustments(
        sockets=[sock], threads=options.threads, connection_limit=options.max_connections,
        # poll(), not select(): select() cannot watch a descriptor numbered beyond 1023.
        asyncore_use_poll=True,
        channel_timeout=options.idle_timeout or 10 ** 9, cleanup_interval=1,
        # A body larger than the app accepts is refused from its Content-Length, before it is read.
        max_request_body_size=max_body + 1, max_request_header_size=64 * 1024,
        # Forwarded headers are the app's business (ProxyFix with --proxies) and otherwise removed before the app
        # sees them, whoever sent them (127.0.0.1 included): waitress itself trusts no proxy (no trusted_proxy).
        trusted_proxy=None, clear_untrusted_proxy_headers=not options.proxies,
        log_socket_errors=False,  # a client that went away is not the server's error
        ident="empeval",
    )


def serve_in_this_process(app: Any, sock: socket.socket, options: ServeOptions, *,
                          parent_pid: int | None = None,
                          on_server: Callable[[GuardedServer], None] | None = None) -> None:
    """Serve `app` on the listening socket `sock` in this process until stopped (`GuardedServer.request_stop`)."""
    sys.setswitchinterval(WORKER_SWITCH_INTERVAL_S)
    logging.getLogger("waitress.queue").setLevel(logging.ERROR)  # "task queue depth" at every burst of load
    server = GuardedServer(app, sock, options, waitress_adjustments(app, sock, options), parent_pid=parent_pid)
    if on_server is not None:
        on_server(server)
    server.run()


# --- the supervisor ---------------------------------------------------------------------------------------------


def listen(host: str, port: int, backlog: int) -> socket.socket:
    """A listening TCP socket on host:port (port 0: any free one). BadInput when it cannot be had."""
    try:
        family, _, _, _, address = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                                      flags=socket.AI_PASSIVE)[0]
        sock = socket.create_server(address[:2], family=family, backlog=backlog)
    except OSError as error:
        raise BadInput(f"cannot listen on {host}:{port}: {error.strerror or error}; choose another --port or "
                       "stop what listens there") from error
    return sock


def _raise_descriptor_limit(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        if target < needed:
            log.warning("open files limited to %d: fewer connections than --max-connections can be held", target)


def _forget_inherited_connections(app: Any) -> None:
    """A forked child must not use the supervisor's pooled database connections (SQLAlchemy's rule for fork)."""
    engine = getattr(app, "extensions", {}).get("empeval.engine")
    if engine is not None:
        engine.dispose(close=False)


def _child(app: Any, sock: socket.socket, options: ServeOptions, parent_pid: int, mask: set) -> int:
    """The body of a forked child: serve until stopped; its exit code. `mask`: the signal mask to restore (the
    supervisor's blocks what it waits for)."""
    servers: list[GuardedServer] = []
    stop = {"asked": False}

    def on_stop(_signum: int, _frame: Any) -> None:
        stop["asked"] = True
        for server in servers:
            server.request_stop()

    def on_server(server: GuardedServer) -> None:
        servers.append(server)
        if stop["asked"]:
            server.request_stop()

    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, on_stop)
        signal.signal(signal.SIGINT, on_stop)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        _forget_inherited_connections(app)
        serve_in_this_process(app, sock, options, parent_pid=parent_pid, on_server=on_server)
    except Exception:  # noqa: BLE001 - reported; before serving, the supervisor stops rather than restart it forever
        traceback.print_exc()
        return 1 if servers else BOOT_FAILED
    from empeval.server.web.chat_api import close_live_replies

    close_live_replies(app)  # a model call still in flight ends as a failure, not mid-air
    return 0


def _fork(app: Any, sock: socket.socket, options: ServeOptions, mask: set) -> int:
    parent_pid = os.getpid()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        code = _child(app, sock, options, parent_pid, mask)
    except BaseException:  # noqa: BLE001 - a child never returns into the supervisor's code
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _stop_children(children: dict[int, int], grace: float) -> None:
    """SIGTERM to every child, then SIGKILL to those still there after `grace` (+ 5) seconds."""
    for pid in children:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace + 5
    left = set(children)
    while left and time.monotonic() < deadline:
        for pid in list(left):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                left.discard(pid)
        time.sleep(0.05)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def supervise(app: Any, sock: socket.socket, options: ServeOptions) -> int:
    """Fork `options.processes` children serving `app` on `sock`; restart one that dies; stop them all on SIGTERM
    or SIGINT. The exit code: 0 when stopped, 1 when a child failed before it could serve."""
    _raise_descriptor_limit(options.max_connections + 64)
    _forget_inherited_connections(app)  # the children open their own
    watched = {signal.SIGTERM, signal.SIGINT, signal.SIGCHLD}
    stop = {"asked": False}

    def on_stop(_signum: int, _frame: Any) -> None:
        stop["asked"] = True

    # The signals are waited for below (sigtimedwait), blocked in this thread; a thread a library started (BLAS's)
    # does not block them, and one delivered there must not kill the supervisor by default: handlers catch those.
    previous = {number: signal.signal(number, handler) for number, handler in
                ((signal.SIGTERM, on_stop), (signal.SIGINT, on_stop), (signal.SIGCHLD, lambda *_: None))}
    previous_mask = signal.pthread_sigmask(signal.SIG_BLOCK, watched)  # restored in each child
    children: dict[int, int] = {}  # pid -> slot
    started: dict[int, float] = {}  # slot -> when its child started
    due: dict[int, float] = {}  # slot -> when to start its next child
    try:
        for slot in range(options.processes):
            children[_fork(app, sock, options, previous_mask)] = slot
            started[slot] = time.monotonic()
        while True:
            received = signal.sigtimedwait(watched, 1.0)
            if stop["asked"] or received is not None and received.si_signo in (signal.SIGTERM, signal.SIGINT):
                return 0
            while children:
                pid, status = os.waitpid(-1, os.WNOHANG)
                if pid == 0:
                    break
                slot = children.pop(pid)
                code = os.waitstatus_to_exitcode(status)
                if code == BOOT_FAILED:
                    sys.stderr.write(f"serve: a server process failed to start (exit {code}); stopping\n")
                    return 1
                lived = time.monotonic() - started[slot]
                sys.stderr.write(f"serve: server process {pid} ended ({'signal ' + str(-code) if code < 0 else code})"
                                 f" after {lived:.0f} s; starting another\n")
                due[slot] = time.monotonic() + (1.0 if lived < 1.0 else 0.0)  # no fork loop if it dies at once
            for slot, when in list(due.items()):
                if time.monotonic() >= when:
                    del due[slot]
                    children[_fork(app, sock, options, previous_mask)] = slot
                    started[slot] = time.monotonic()
    finally:
        _stop_children(children, options.grace)
        sock.close()
        signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)
        for number, handler in previous.items():
            signal.signal(number, handler)


def run(app: Any, options: ServeOptions, *, host: str, port: int,
        on_listening: Callable[[str, int], None] | None = None) -> int:
    """Listen on host:port, then serve `app` with `options` until SIGTERM or SIGINT (see `supervise`)."""
    if not callable(app):
        raise TypeError(f"{app!r} is not a WSGI application: nothing to serve")
    sock = listen(host, port, options.backlog)
    bound_host, bound_port = sock.getsockname()[:2]
    if on_listening is not None:
        on_listening(bound_host, bound_port)
    return supervise(app, sock, options)
