#!/usr/bin/env python3
"""Hostile HTTP/3 clients on aioquic, for servery's attack tests (issue 27).

    h3hostile.py tiny URL [--streams K] [--bytes N] [--hold S] [--in-order]
    h3hostile.py overflow URL [--bytes N]
    h3hostile.py retire URL [--sequence S]
    h3hostile.py churn URL [--rounds N]
    h3hostile.py uni URL [--streams K]
    h3hostile.py qpack URL
    h3hostile.py resume URL

Each mode is one QUIC connection doing what a well-behaved client does not:

- tiny: K POST requests of N-byte bodies, every byte of each stream (its
  HEADERS frame included) in a STREAM frame of its own, the even offsets
  first: the server would hold up to N/2 one-byte pieces per stream that
  it cannot read yet. Once every even byte is out it prints {"held":
  true}, waits --hold seconds, then sends the odd bytes and prints one
  JSON line per response, {"status": S, "body_len": L}; or {"closed":
  code, "reason": ...} as soon as the server closes the connection. With
  --in-order the bytes go in order (no gaps, no hold).
- overflow: a POST whose body goes on with 100 bytes ending at offset
  --bytes, past the flow-control credit the server gave (the client's own
  bookkeeping told the credit is unlimited).
- retire: a RETIRE_CONNECTION_ID frame for a sequence number the server
  never issued (RFC 9000 §19.16: a PROTOCOL_VIOLATION).
- churn: a GET, then --rounds times: retire the connection ID in use, move
  to the next the server issued, and GET again. Prints {"ok": n,
  "ids": distinct connection IDs used}.

- uni: a GET, then K unidirectional streams of a reserved type, as many
  at once as the server's credit allows; prints {"opened": K,
  "blocked_left": streams still waiting for credit, "closed": code or
  null, "then": the status of a GET after}.
- qpack: a GET, then --bytes of QPACK encoder instructions setting a
  dynamic table of 4,096 bytes, which the server's SETTINGS did not allow;
  prints {"sent": bytes the server's flow control let out, "closed": code
  or null} a second later.

- resume: a GET, then two connections resuming the first's session with
  its last ticket, each sending its GET as early (0-RTT) data if the ticket
  allows; prints {"tickets": n, "max_early_data": what the ticket allows
  (null for none), "resumed", "early_data_accepted", "status" of the first
  resumption, and "again_..." of the second, a replay's view}.

overflow and retire print {"closed": error_code, "reason": ...} when the
server closes the connection, or {"closed": null} if it did not within the
timeout. Exit status: 0 when the mode ran to its end (whatever the server
answered), 1 when the connection could not be made, 2 on bad usage. Run
with the venv that scripts/install-h3-clients.sh makes.
"""

import argparse
import asyncio
import json
import logging
import os
import ssl
import sys
from urllib.parse import urlsplit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from aioquic.asyncio import connect  # noqa: E402
from aioquic.h3.connection import H3_ALPN  # noqa: E402
from aioquic.quic.configuration import QuicConfiguration  # noqa: E402
from aioquic.quic.packet import QuicStreamFrame  # noqa: E402

from h3get import Client, Exchange, quiet_leftovers  # noqa: E402


def emit(obj):
    print(json.dumps(obj), flush=True)


def fields(method, url, length):
    parts = urlsplit(url)
    out = [
        (b":method", method.encode()),
        (b":scheme", b"https"),
        (b":authority", parts.netloc.encode()),
        (b":path", (parts.path or "/").encode()),
    ]
    if length is not None:
        out.append((b"content-length", str(length).encode()))
    return out


class Schedule:
    """Sends a stream's bytes one per frame: in order, or the even offsets
    first with the odd ones waiting for `release`."""

    def __init__(self, sender, length, in_order):
        self.sender = sender
        if in_order:
            self.evens, self.odds = list(range(length)), []
        else:
            self.evens = list(range(0, length, 2))
            self.odds = list(range(1, length, 2))
        self.released = False
        self.original = sender.get_frame
        sender.get_frame = self.get_frame

    def evens_out(self):
        return not self.evens

    def get_frame(self, max_size, max_offset=None):
        s = self.sender
        queue = self.evens if self.evens else (self.odds if self.released else None)
        if queue is None:
            return None
        if not queue:
            # Every byte went out once: the FIN, and whatever was lost.
            return self.original(max_size, max_offset)
        if max_size < 1:
            return None
        offset = queue[0]
        if max_offset is not None and offset + 1 > max_offset:
            return None
        queue.pop(0)
        s._pending.subtract(offset, offset + 1)
        if offset + 1 > s.highest_offset:
            s.highest_offset = offset + 1
        start = offset - s._buffer_start
        return QuicStreamFrame(data=bytes(s._buffer[start : start + 1]), offset=offset)


async def tiny(args, client):
    quic = client._quic
    schedules, exchanges = [], []
    body = b"x" * args.bytes
    for _ in range(args.streams):
        stream_id = quic.get_next_available_stream_id()
        exchange = Exchange("POST", args.url)
        client.exchanges[stream_id] = exchange
        exchanges.append(exchange)
        client.h3.send_headers(stream_id, fields("POST", args.url, len(body)))
        client.h3.send_data(stream_id, body, end_stream=True)
        stream = quic._get_or_create_stream_for_send(stream_id)
        total = stream.sender._buffer_fin
        schedules.append(Schedule(stream.sender, total, args.in_order))
    client.transmit()
    while not all(s.evens_out() for s in schedules):
        if client.closed_code is not None:
            emit({"closed": client.closed_code, "reason": client.closed_reason})
            return
        await asyncio.sleep(0.05)
        client.transmit()
    if not args.in_order:
        # Let the last of them be acknowledged: then the server holds them.
        await asyncio.sleep(0.5)
        if client.closed_code is not None:
            emit({"closed": client.closed_code, "reason": client.closed_reason})
            return
        emit({"held": True})
        await asyncio.sleep(args.hold)
    for s in schedules:
        s.released = True
    client.transmit()
    for exchange in exchanges:
        try:
            ex = await exchange.done
            emit({"status": ex.status, "body_len": len(ex.body)})
        except ConnectionError as e:
            emit({"error": str(e)})


async def closed(client, limit):
    """The server's close of `client`'s connection, or None within `limit`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while loop.time() < deadline:
        if client.closed_code is not None:
            return client.closed_code
        await asyncio.sleep(0.05)
    return None


async def overflow(args, client):
    quic = client._quic
    stream_id = quic.get_next_available_stream_id()
    exchange = Exchange("POST", args.url)
    client.exchanges[stream_id] = exchange
    client.h3.send_headers(stream_id, fields("POST", args.url, args.bytes))
    client.h3.send_data(stream_id, b"x" * 100, end_stream=False)
    client.transmit()
    await asyncio.sleep(0.2)
    # Then 100 bytes ending at --bytes, however little credit was given:
    # the client believes it was given all it wants.
    quic._remote_max_data = 1 << 60
    stream = quic._get_or_create_stream_for_send(stream_id)
    stream.max_stream_data_remote = 1 << 60
    sender, sent = stream.sender, []

    def far(max_size, max_offset=None):
        if sent or max_size < 100:
            return None
        sent.append(True)
        offset = max(args.bytes - 100, sender.highest_offset)
        sender.highest_offset = offset + 100
        return QuicStreamFrame(data=b"x" * 100, offset=offset)

    sender.get_frame = far
    sender.buffer_is_empty = False
    client.transmit()
    code = await closed(client, args.timeout / 2)
    emit({"closed": code, "reason": client.closed_reason})


async def retire(args, client):
    await client.request("GET", args.url, [], None)
    client._quic._retire_connection_ids.append(args.sequence)
    client.transmit()
    code = await closed(client, args.timeout / 2)
    emit({"closed": code, "reason": client.closed_reason})


async def churn(args, client):
    quic = client._quic
    ids = set()
    ok = 0
    for _ in range(args.rounds + 1):
        ids.add(bytes(quic._peer_cid.cid))
        ex = await client.request("GET", args.url, [], None)
        if ex.status == 200:
            ok += 1
        # Wait for the server's next connection ID, then move to it.
        for _ in range(100):
            if quic._peer_cid_available:
                break
            await asyncio.sleep(0.01)
        quic.change_connection_id()
        client.transmit()
    emit({"ok": ok, "ids": len(ids)})


class Watched(Client):
    """h3get's client, keeping the close's error code."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.closed_code = None
        self.closed_reason = None

    def quic_event_received(self, event):
        from aioquic.quic.events import ConnectionTerminated

        if isinstance(event, ConnectionTerminated):
            self.closed_code = event.error_code
            self.closed_reason = event.reason_phrase
        super().quic_event_received(event)


async def uni(args, client):
    quic = client._quic
    await client.request("GET", args.url, [], None)
    for _ in range(args.streams):
        stream_id = quic.get_next_available_stream_id(is_unidirectional=True)
        # A reserved ("grease") stream type, 0x21, which the server must
        # not take as an error (RFC 9114 §6.2.3): it stops reading it, and
        # its credit comes back for the next.
        quic.send_stream_data(stream_id, b"\x40\x21" + b"x" * 100, end_stream=True)
    client.transmit()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + args.timeout / 2
    while quic._streams_blocked_uni and loop.time() < deadline:
        await asyncio.sleep(0.05)
        client.transmit()
    ex = await client.request("GET", args.url, [], None)
    emit({
        "opened": args.streams,
        "blocked_left": len(quic._streams_blocked_uni),
        "closed": client.closed_code,
        "then": ex.status,
    })


async def qpack(args, client):
    quic = client._quic
    await client.request("GET", args.url, [], None)
    # --bytes of "Set Dynamic Table Capacity 4096" on our QPACK encoder
    # stream, which the server's SETTINGS did not allow a table for.
    encoder = client.h3._local_encoder_stream_id
    quic.send_stream_data(encoder, b"\x3f\xe1\x1f" * (args.bytes // 3))
    client.transmit()
    await asyncio.sleep(1.0)
    stream = quic._get_or_create_stream_for_send(encoder)
    emit({"sent": stream.sender.highest_offset, "closed": client.closed_code})


MODES = {
    "tiny": tiny,
    "overflow": overflow,
    "retire": retire,
    "churn": churn,
    "uni": uni,
    "qpack": qpack,
    "resume": None,
}


def configuration(args):
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN)
    config.idle_timeout = args.timeout
    config.verify_mode = ssl.CERT_NONE
    return config


async def resume(args):
    """Two connections: the second resumes the first's session with the
    last ticket it got, and would send its request as 0-RTT data had the
    ticket allowed any."""
    url = urlsplit(args.url)
    tickets = []
    async with connect(
        url.hostname,
        url.port or 443,
        configuration=configuration(args),
        create_protocol=Watched,
        session_ticket_handler=tickets.append,
    ) as client:
        await client.request("GET", args.url, [], None)
        await asyncio.sleep(0.3)
    if not tickets:
        emit({"tickets": 0})
        return
    seen = []
    # The same ticket twice: the second use is what a replay looks like.
    for _ in range(2):
        config = configuration(args)
        config.session_ticket = tickets[-1]
        async with connect(
            url.hostname,
            url.port or 443,
            configuration=config,
            create_protocol=Watched,
            wait_connected=False,
        ) as client:
            ex = await client.request("GET", args.url, [], None)
            tls = client._quic.tls
            seen.append((tls.session_resumed, tls.early_data_accepted, ex.status))
    emit({
        "tickets": len(tickets),
        "max_early_data": tickets[-1].max_early_data_size,
        "resumed": seen[0][0],
        "early_data_accepted": seen[0][1],
        "status": seen[0][2],
        "again_resumed": seen[1][0],
        "again_early_data_accepted": seen[1][1],
        "again_status": seen[1][2],
    })


async def run(args):
    asyncio.get_running_loop().set_exception_handler(quiet_leftovers)
    if args.mode == "resume":
        return await resume(args)
    url = urlsplit(args.url)
    async with connect(
        url.hostname, url.port or 443, configuration=configuration(args), create_protocol=Watched
    ) as client:
        await MODES[args.mode](args, client)


def main():
    p = argparse.ArgumentParser(description="Hostile HTTP/3 clients.")
    p.add_argument("mode", choices=sorted(MODES))
    p.add_argument("url")
    p.add_argument("--streams", type=int, default=1)
    p.add_argument("--bytes", type=int, default=4096)
    p.add_argument("--hold", type=float, default=0.0)
    p.add_argument("--in-order", action="store_true")
    p.add_argument("--sequence", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--timeout", type=float, default=30.0)
    args = p.parse_args()
    if args.streams < 1 or args.bytes < 1 or args.rounds < 0:
        p.error("--streams and --bytes want at least 1, --rounds at least 0")
    logging.getLogger("quic").setLevel(logging.CRITICAL)
    try:
        asyncio.run(asyncio.wait_for(run(args), args.timeout + 1))
    except asyncio.TimeoutError:
        print(f"h3hostile: not done within {args.timeout + 1}s", file=sys.stderr)
        return 1
    except (ConnectionError, OSError) as e:
        print(f"h3hostile: {e or 'connection failed'}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
