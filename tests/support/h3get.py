#!/usr/bin/env python3
"""A small HTTP/3 client on aioquic, for servery's interop tests (issue 27).

    h3get.py [--insecure] [--cafile F] [--header 'Name: value']... [--method M]
             [--data-file F] [--repeat N] [--parallel N] [--save-dir D]
             [--timeout S] URL...

Fetches every URL, --repeat times over (URL1 URL2 URL1 URL2 ...), all on ONE
QUIC connection to the first URL's host and port (so every URL must share
them), --parallel requests at a time (default 1: in order, one after the
other). Prints one JSON object per response on stdout, in request order:

    {"url": ..., "status": 200, "headers": [[name, value], ...],
     "body_len": N, "body_sha256": hex, "local_port": P}

`headers` are the response's fields as sent (lowercase, pseudo-headers and
interim 1xx responses left out); `local_port` is the client's UDP port, the
same on every line because they share the connection. --save-dir D also
writes response i's body (counting from 0) to D/i. Without --insecure the
server's certificate is verified against --cafile (else the system roots).

Exit status: 0 when every request got a response; 1, with the reason on
stderr, when the connection failed (handshake, timeout, closed by the peer)
or a stream was reset; 2 on bad usage. Run with the venv that
scripts/install-h3-clients.sh makes (target/tools/aioquic/bin/python).
"""

import argparse
import asyncio
import hashlib
import json
import logging
import os
import ssl
import sys
from urllib.parse import urlsplit

from aioquic.asyncio import QuicConnectionProtocol, connect
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ConnectionTerminated, StreamReset


class Exchange:
    """One request's response as it arrives: status, fields, body."""

    def __init__(self, method, url):
        self.method = method
        self.url = url
        self.status = None
        self.headers = []
        self.body = bytearray()
        self.done = asyncio.get_running_loop().create_future()

    def finish(self):
        """The response is complete: check its length, then hand it over."""
        length = [v for n, v in self.headers if n == "content-length"]
        # RFC 9110 §8.6: a HEAD or 304 response's content-length is that of
        # the content a GET would get, with no content sent here.
        if length and self.method != "HEAD" and self.status != 304:
            if length[0] != str(len(self.body)):
                why = f"{self.url}: content-length {length[0]} but {len(self.body)} bytes"
                self.done.set_exception(ConnectionError(why))
                return
        self.done.set_result(self)


class H3(H3Connection):
    """aioquic's HTTP/3 layer without its content-length check, which does
    not know the request's method and so fails every HEAD response that
    gives the length (aioquic 1.7.2); Exchange.finish checks it instead."""

    def _check_content_length(self, stream):
        pass


class Client(QuicConnectionProtocol):
    """A QUIC connection speaking HTTP/3, one Exchange per request stream."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.h3 = H3(self._quic)
        self.exchanges = {}
        self.closed_why = None

    async def request(self, method, url, headers, body):
        parts = urlsplit(url)
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        fields = [
            (b":method", method.encode()),
            (b":scheme", b"https"),
            (b":authority", parts.netloc.encode()),
            (b":path", path.encode()),
        ]
        fields += [(n.lower().encode(), v.encode()) for n, v in headers]
        if body is not None:
            fields.append((b"content-length", str(len(body)).encode()))
        stream_id = self._quic.get_next_available_stream_id()
        exchange = Exchange(method, url)
        self.exchanges[stream_id] = exchange
        self.h3.send_headers(stream_id, fields, end_stream=body is None)
        if body is not None:
            self.h3.send_data(stream_id, body, end_stream=True)
        self.transmit()
        return await exchange.done

    def quic_event_received(self, event):
        if isinstance(event, ConnectionTerminated):
            why = f"connection closed: error 0x{event.error_code:x}"
            if event.reason_phrase:
                why += f" ({event.reason_phrase})"
            self.closed_why = why
            for exchange in self.exchanges.values():
                if not exchange.done.done():
                    exchange.done.set_exception(ConnectionError(why))
            return
        if isinstance(event, StreamReset):
            exchange = self.exchanges.get(event.stream_id)
            if exchange is not None and not exchange.done.done():
                why = f"{exchange.url}: stream reset by the server, error 0x{event.error_code:x}"
                exchange.done.set_exception(ConnectionError(why))
            return
        for h3_event in self.h3.handle_event(event):
            exchange = self.exchanges.get(h3_event.stream_id)
            if exchange is None or exchange.done.done():
                continue
            if isinstance(h3_event, HeadersReceived):
                fields = dict(h3_event.headers)
                status = int(fields.get(b":status", b"0"))
                if exchange.status is None and 100 <= status < 200:
                    pass  # RFC 9114 §4.1: interim responses precede the final one
                elif exchange.status is None:
                    exchange.status = status
                    exchange.headers = [
                        [n.decode("latin-1"), v.decode("latin-1")]
                        for n, v in h3_event.headers
                        if not n.startswith(b":")
                    ]
                # A later HEADERS frame is trailers: not reported.
            elif isinstance(h3_event, DataReceived):
                exchange.body += h3_event.data
            if h3_event.stream_ended and exchange.status is not None:
                exchange.finish()


def parse_args():
    p = argparse.ArgumentParser(description="Fetch URLs over HTTP/3 on one QUIC connection.")
    p.add_argument("urls", nargs="+", metavar="URL")
    p.add_argument("--insecure", action="store_true", help="do not verify the certificate")
    p.add_argument("--cafile", help="PEM roots to verify the server's certificate with")
    p.add_argument("--header", action="append", default=[], help="'Name: value', repeatable")
    p.add_argument("--method", default="GET", choices=["GET", "POST", "HEAD"])
    p.add_argument("--data-file", help="the request body (sent with content-length)")
    p.add_argument("--repeat", type=int, default=1, help="fetch the URL list N times")
    p.add_argument("--parallel", type=int, default=1, help="requests in flight at once")
    p.add_argument("--save-dir", help="write response i's body to DIR/i")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds to give up after")
    args = p.parse_args()
    args.fields = []
    for h in args.header:
        name, sep, value = h.partition(":")
        if not sep or not name.strip():
            p.error(f"--header wants 'Name: value', got {h!r}")
        args.fields.append((name.strip(), value.strip()))
    origins = {urlsplit(u)[:2] for u in args.urls}
    if len(origins) != 1 or next(iter(origins))[0] != "https":
        p.error("every URL must be https:// with the same host and port (one connection)")
    if args.repeat < 1 or args.parallel < 1:
        p.error("--repeat and --parallel want at least 1")
    return args


def quiet_leftovers(loop, context):
    """Drop the ConnectionError that aioquic sets on its handshake waiter
    when a connection we already gave up on closes; report the rest."""
    if not isinstance(context.get("exception"), ConnectionError):
        loop.default_exception_handler(context)


async def run(args):
    asyncio.get_running_loop().set_exception_handler(quiet_leftovers)
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN)
    # No handshake, or a silent server, ends the connection with "Idle
    # timeout" after --timeout; main's bound catches one that talks but
    # never finishes.
    config.idle_timeout = args.timeout
    if args.insecure:
        config.verify_mode = ssl.CERT_NONE
    elif args.cafile:
        config.load_verify_locations(args.cafile)
    body = None
    if args.data_file:
        with open(args.data_file, "rb") as f:
            body = f.read()
    first = urlsplit(args.urls[0])
    made = []

    def make(*a, **kw):
        made.append(Client(*a, **kw))
        return made[-1]

    try:
        async with connect(
            first.hostname, first.port or 443, configuration=config, create_protocol=make
        ) as client:
            await fetch(args, client, body)
    except ConnectionError as e:
        # A failed handshake raises a bare ConnectionError; the close says why.
        why = str(e) or (made and made[0].closed_why) or "connection failed"
        raise ConnectionError(why) from None


async def fetch(args, client, body):
    """Send the requests on `client` and print the responses in order."""
    local_port = client._transport.get_extra_info("sockname")[1]
    slots = asyncio.Semaphore(args.parallel)

    async def one(url):
        async with slots:
            return await client.request(args.method, url, args.fields, body)

    urls = args.urls * args.repeat
    tasks = [asyncio.ensure_future(one(u)) for u in urls]
    try:
        for i, task in enumerate(tasks):
            ex = await task
            if args.save_dir:
                with open(os.path.join(args.save_dir, str(i)), "wb") as f:
                    f.write(ex.body)
            line = {
                "url": ex.url,
                "status": ex.status,
                "headers": ex.headers,
                "body_len": len(ex.body),
                "body_sha256": hashlib.sha256(ex.body).hexdigest(),
                "local_port": local_port,
            }
            print(json.dumps(line), flush=True)
    finally:
        for task in tasks:
            task.cancel()


def main():
    args = parse_args()
    # aioquic logs a failed handshake too; the one line below says it.
    logging.getLogger("quic").setLevel(logging.CRITICAL)
    try:
        asyncio.run(asyncio.wait_for(run(args), args.timeout + 1))
    except asyncio.TimeoutError:
        print(f"h3get: not done within {args.timeout + 1}s (timed out)", file=sys.stderr)
        return 1
    except (ConnectionError, OSError) as e:
        why = str(e) or "connection failed (handshake refused or no QUIC server there)"
        print(f"h3get: {why}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
