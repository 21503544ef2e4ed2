"""pagebench's static HTTP/3 server on aioquic (`pagebench --servers aioquic`).

Serves a pages tree over h3 on one UDP port, answers `POST /upload` with the byte count
(`{"bytes": N, "duration_ms": F}`, as pagebench's own server), and writes two JSON-lines files
pagebench reads: the request log (pagebench's `RequestRecord` shape) and each connection's
transport statistics as aioquic counts them (`ConnectionStats` with `quic`). On SIGUSR1 it
appends a snapshot of the connections still open, then a `{"snapshot": N, "open": M}` line.
After binding it writes the `--ready` file. pagebench writes this file (compiled into it) into
the server's work directory and runs it with the virtual environment ./setup.sh made.
"""

import argparse
import asyncio
import json
import os
import signal
import socket
import sys
import time

import aioquic
from aioquic.asyncio import QuicConnectionProtocol, serve
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic import events
from aioquic.quic.configuration import QuicConfiguration

SO_RCVBUFFORCE = 33
SO_SNDBUFFORCE = 32
IDLE_TIMEOUT_S = 30.0

CONTENT_TYPES = {  # pagebench's own table (workload::content_type_for)
    "html": "text/html; charset=utf-8",
    "htm": "text/html; charset=utf-8",
    "css": "text/css; charset=utf-8",
    "js": "text/javascript; charset=utf-8",
    "mjs": "text/javascript; charset=utf-8",
    "png": "image/png",
    "ttf": "font/ttf",
    "json": "application/json",
    "svg": "image/svg+xml",
    "jpg": "image/jpeg",
    "jpeg": "image/jpeg",
    "woff2": "font/woff2",
    "txt": "text/plain; charset=utf-8",
    "md": "text/plain; charset=utf-8",
}


def unix_ms():
    return int(time.time() * 1000)


class JsonLines:
    """Appends JSON lines, one write each (pagebench reads complete lines only)."""

    def __init__(self, path):
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, value):
        os.write(self.fd, (json.dumps(value) + "\n").encode())


def resolve(root, target):
    """The file below `root` a GET for `target` names, or None."""
    path = target.split("?")[0].split("#")[0]
    parts = []
    for seg in path.split("/"):
        if seg == "":
            continue
        if seg in (".", "..") or "\\" in seg or "%" in seg:
            return None
        parts.append(seg)
    f = os.path.join(root, *parts)
    if os.path.isdir(f):
        f = os.path.join(f, "index.html")
    real = os.path.realpath(f)
    if not (real == root or real.startswith(root + os.sep)) or not os.path.isfile(real):
        return None
    return real


class CountingTransport:
    """The server's shared UDP transport, counting what one connection sends."""

    def __init__(self, inner, counters):
        self.inner = inner
        self.counters = counters

    def sendto(self, data, addr):
        self.counters["tx_datagrams"] += 1
        self.counters["tx_bytes"] += len(data)
        self.inner.sendto(data, addr)

    def __getattr__(self, name):
        return getattr(self.inner, name)


class Request:
    def __init__(self, method, path, authority, seq):
        self.method = method
        self.path = path
        self.authority = authority
        self.seq = seq
        self.time_unix_ms = unix_ms()
        self.start = time.monotonic()
        self.bytes_received = 0


class H3Server(QuicConnectionProtocol):
    app = None  # the App, set before serving

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        app = H3Server.app
        self.app = app
        self.id = app.next_id()
        self.h3 = None
        self.peer = None
        self.opened_unix_ms = unix_ms()
        self.opened = time.monotonic()
        self.established = None
        self.requests = {}
        self.served = 0
        self.closed = False
        self.error = None
        self.counters = {
            "tx_datagrams": 0,
            "tx_bytes": 0,
            "rx_datagrams": 0,
            "rx_bytes": 0,
            "lost_packets": 0,
            "lost_bytes": 0,
            "congestion_events": 0,
        }
        quic = self._quic
        quic._local_max_streams_bidi.value = app.args.max_streams
        # Count losses and window reductions where aioquic's recovery handles them.
        loss = quic._loss
        counters = self.counters
        original_lost = loss._on_packets_lost

        def on_packets_lost(*, packets, **kw):
            packets = list(packets)
            counters["lost_packets"] += len(packets)
            counters["lost_bytes"] += sum(p.sent_bytes for p in packets)
            before = loss._cc.congestion_window
            original_lost(packets=packets, **kw)
            if loss._cc.congestion_window < before:
                counters["congestion_events"] += 1

        loss._on_packets_lost = on_packets_lost
        app.connections[self.id] = self

    def connection_made(self, transport):
        super().connection_made(CountingTransport(transport, self.counters))

    def datagram_received(self, data, addr):
        self.peer = addr
        self.counters["rx_datagrams"] += 1
        self.counters["rx_bytes"] += len(data)
        super().datagram_received(data, addr)

    def quic_event_received(self, event):
        if isinstance(event, events.ProtocolNegotiated) and event.alpn_protocol in H3_ALPN:
            self.h3 = H3Connection(self._quic)
        elif isinstance(event, events.HandshakeCompleted):
            self.established = time.monotonic()
        elif isinstance(event, events.StreamReset):
            r = self.requests.pop(event.stream_id, None)
            if r is not None:
                self.log(event.stream_id, r, 0, 0, "stream reset by the client (%#x)" % event.error_code)
        elif isinstance(event, events.ConnectionTerminated):
            if event.error_code != 0:
                self.error = "closed with code %#x: %s" % (event.error_code, event.reason_phrase)
            self.finish()
        if self.h3 is not None:
            for e in self.h3.handle_event(event):
                self.h3_event(e)

    def finish(self):
        if self.closed:
            return
        self.closed = True
        for sid, r in list(self.requests.items()):
            self.log(sid, r, 0, 0, "connection closed")
        self.requests.clear()
        self.app.stats.write(self.stats(closed=True))
        self.app.connections.pop(self.id, None)

    def connection_lost(self, exc):
        self.finish()
        super().connection_lost(exc)

    def h3_event(self, e):
        if isinstance(e, HeadersReceived):
            h = {k: v for k, v in e.headers}
            r = Request(
                h.get(b":method", b"").decode(),
                h.get(b":path", b"").decode(),
                h.get(b":authority", b"").decode() or None,
                self.served + len(self.requests),
            )
            self.requests[e.stream_id] = r
            plain = r.path.split("?")[0]
            if not (r.method == "POST" and plain == "/upload"):
                self.answer(e.stream_id, r, plain)
            elif e.stream_ended:
                self.upload_done(e.stream_id, r)
        elif isinstance(e, DataReceived):
            r = self.requests.get(e.stream_id)
            if r is not None:
                r.bytes_received += len(e.data)
                if e.stream_ended:
                    self.upload_done(e.stream_id, r)

    def upload_done(self, sid, r):
        body = json.dumps(
            {"bytes": r.bytes_received, "duration_ms": (time.monotonic() - r.start) * 1e3}
        ).encode()
        self.respond(sid, r, 200, "application/json", body)

    def answer(self, sid, r, plain):
        if plain == "/upload":
            return self.respond(sid, r, 405, "text/plain; charset=utf-8", b"use POST\n")
        if r.method not in ("GET", "HEAD"):
            return self.respond(sid, r, 405, "text/plain; charset=utf-8", b"not allowed\n")
        f = resolve(self.app.root, plain)
        if f is None:
            return self.respond(sid, r, 404, "text/plain; charset=utf-8", b"not found\n")
        with open(f, "rb") as fh:
            body = fh.read()
        ct = CONTENT_TYPES.get(f.rsplit(".", 1)[-1], "application/octet-stream")
        self.respond(sid, r, 200, ct, body, head=r.method == "HEAD")

    def respond(self, sid, r, status, ctype, body, head=False):
        headers = [
            (b":status", str(status).encode()),
            (b"content-type", ctype.encode()),
            (b"content-length", str(len(body)).encode()),
            (b"cache-control", b"no-store"),
            (b"server", b"aioquic"),
        ]
        if self.app.args.alt_svc:
            headers.append((b"alt-svc", ('h3=":%d"; ma=86400' % self.app.port).encode()))
        sent = 0 if head else len(body)
        self.h3.send_headers(sid, headers, end_stream=sent == 0)
        if sent:
            # aioquic buffers the whole body in the stream: all handed to the transport now.
            self.h3.send_data(sid, body, end_stream=True)
        self.transmit()
        self.requests.pop(sid, None)
        self.served += 1
        self.log(sid, r, status, sent, None)

    def log(self, sid, r, status, sent, error):
        self.app.log.write(
            {
                "time_unix_ms": r.time_unix_ms,
                "client": "%s:%d" % (self.peer[0], self.peer[1]) if self.peer else "0.0.0.0:0",
                "protocol": "h3",
                "method": r.method,
                "path": r.path,
                "status": status,
                "bytes_sent": sent,
                "bytes_received": r.bytes_received,
                "duration_ms": (time.monotonic() - r.start) * 1e3,
                "connection_id": self.id,
                "stream_id": sid,
                "seq_on_connection": r.seq,
                "error": error,
                "authority": r.authority,
            }
        )

    def stats(self, closed):
        loss = self._quic._loss
        c = self.counters
        rtt_min = loss._rtt_min if loss._rtt_min != float("inf") else 0.0
        return {
            "connection_id": self.id,
            "transport": "quic",
            "client": "%s:%d" % (self.peer[0], self.peer[1]) if self.peer else "0.0.0.0:0",
            "protocol": "h3" if self.h3 is not None else None,
            "opened_unix_ms": self.opened_unix_ms,
            "closed_unix_ms": unix_ms() if closed else None,
            "handshake_ms": (self.established - self.opened) * 1e3 if self.established else None,
            "requests": self.served,
            "error": self.error,
            "tcp": None,
            "quic": {
                "congestion_controller": self.app.args.cc,
                "rtt_us": int(loss._rtt_smoothed * 1e6),
                "min_rtt_us": int(rtt_min * 1e6),
                "cwnd": loss._cc.congestion_window,
                "congestion_events": c["congestion_events"],
                "lost_packets": c["lost_packets"],
                "lost_bytes": c["lost_bytes"],
                "sent_packets": c["tx_datagrams"],
                "udp_tx_bytes": c["tx_bytes"],
                "udp_tx_datagrams": c["tx_datagrams"],
                "udp_tx_ios": c["tx_datagrams"],
                "udp_rx_bytes": c["rx_bytes"],
                "udp_rx_datagrams": c["rx_datagrams"],
                "current_mtu": self._quic._configuration.max_datagram_size,
                "black_holes_detected": 0,
            },
        }


class App:
    def __init__(self, args):
        self.args = args
        self.root = os.path.realpath(args.root)
        self.port = int(args.listen.rsplit(":", 1)[1])
        self.log = JsonLines(args.log)
        self.stats = JsonLines(args.stats)
        self.connections = {}
        self.snapshots = 0
        self._next = 0

    def next_id(self):
        self._next += 1
        return self._next

    def snapshot(self):
        self.snapshots += 1
        for c in list(self.connections.values()):
            self.stats.write(c.stats(closed=False))
        self.stats.write({"snapshot": self.snapshots, "open": len(self.connections)})


def set_buffer(sock, force, plain, want):
    if want is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, force, want)
        except OSError:
            sock.setsockopt(socket.SOL_SOCKET, plain, want)
    return sock.getsockopt(socket.SOL_SOCKET, plain)


async def main(args):
    app = App(args)
    H3Server.app = app
    config = QuicConfiguration(
        alpn_protocols=H3_ALPN,
        is_client=False,
        congestion_control_algorithm=args.cc,
        idle_timeout=IDLE_TIMEOUT_S,
        max_data=args.conn_window,
        max_stream_data=args.stream_window,
    )
    config.load_cert_chain(args.cert, args.key)
    host, port = args.listen.rsplit(":", 1)
    server = await serve(host, int(port), configuration=config, create_protocol=H3Server)
    sock = server._transport.get_extra_info("socket")
    rcv = set_buffer(sock, SO_RCVBUFFORCE, socket.SO_RCVBUF, args.udp_recv_buffer)
    snd = set_buffer(sock, SO_SNDBUFFORCE, socket.SO_SNDBUF, args.udp_send_buffer)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGUSR1, app.snapshot)
    for s in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(s, stop.set)
    ready = {
        "server": "aioquic %s (Python %s)" % (aioquic.__version__, sys.version.split()[0]),
        "listen": args.listen,
        "udp_recv_buffer": rcv,
        "udp_send_buffer": snd,
        "cc": args.cc,
        "pacing": True,
    }
    tmp = args.ready + ".tmp"
    with open(tmp, "w") as f:
        f.write(json.dumps(ready) + "\n")
    os.rename(tmp, args.ready)
    await stop.wait()
    server.close()


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--listen", required=True, help="IP:PORT")
    p.add_argument("--root", required=True)
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--stats", required=True)
    p.add_argument("--ready", required=True)
    p.add_argument("--max-streams", type=int, default=128)
    p.add_argument("--stream-window", type=int, default=1048576)
    p.add_argument("--conn-window", type=int, default=1048576)
    p.add_argument("--cc", choices=["reno", "cubic"], default="reno")
    p.add_argument("--udp-recv-buffer", type=int)
    p.add_argument("--udp-send-buffer", type=int)
    p.add_argument("--alt-svc", action="store_true")
    return p.parse_args()


if __name__ == "__main__":
    asyncio.run(main(parse()))
