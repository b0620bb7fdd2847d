#!/usr/bin/env python3
"""Helper for bench/scripts/idle-tls.sh; standard library only.

Subcommands (each prints one JSON object on stdout unless said otherwise):

  idle    The idle-memory client, over TLS 1.3 (certificate checked against
          --cafile). Warm the server up with one request on its own
          connection, read the RSS of the server's process tree (VmRSS of
          --pid and all its descendants, from /proc), open --conns
          connections that each make one GET of --path and read the whole
          response, keep them open, sleep --settle seconds, read the RSS
          again, check that every connection is still open, close them all.
          --proto h1: ALPN http/1.1, a Content-Length framed response.
          --proto h2: ALPN h2, the client preface, an empty SETTINGS, one
          HEADERS frame (END_STREAM|END_HEADERS, HPACK by hand), SETTINGS
          ACK and PING ACK as the server asks, until the DATA frame with
          END_STREAM on stream 1.
          --plain: the same without TLS (h2c by prior knowledge for h2),
          for a server started by hand with --bind.
  meta    Identity of the run: command, git commit, machine, kernel, each
          server's binary, version and sha256.
  summary One progress line about one sample.
  report  Print the tables of medians and of every trial (markdown, stdout)
          and write the JSON file with the identity, every raw sample and the
          medians.
"""

import argparse
import json
import os
import platform
import resource
import select
import socket
import ssl
import struct
import subprocess
import sys
import time

# The pieces both idle benchmarks read the same way (/proc, an HTTP/1.1
# GET, identity, medians) are idle_reads.py's.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from idle_reads import (  # noqa: E402
    STATUS_FIELDS,
    fmt,
    get,
    median,
    proc_status,
    sha256,
    write_results,
)

# --- /proc ------------------------------------------------------------------


def proc_tree(root):
    """ROOT and all its descendants, from the parent links in /proc/*/stat."""
    children = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue  # exited since listdir
        # comm (field 2) may hold spaces and ')'; after the last ") " come
        # state, ppid, ...
        ppid = int(stat.rsplit(") ", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(name))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, ()))
    return sorted(tree)


def tree_memory(root):
    """Sum of the STATUS_FIELDS over ROOT's process tree, and each process's."""
    total = dict.fromkeys(STATUS_FIELDS, 0)
    per_pid = {}
    for pid in proc_tree(root):
        try:
            st = proc_status(pid)
            with open(f"/proc/{pid}/comm") as f:
                comm = f.read().strip()
        except OSError:
            continue
        per_pid[str(pid)] = dict(st, comm=comm)
        for k in STATUS_FIELDS:
            total[k] += st.get(k, 0)
    if not per_pid:
        raise RuntimeError(f"server pid {root} is gone")
    return {"total": total, "processes": per_pid}


# --- TLS --------------------------------------------------------------------


def tls_context(cafile, proto):
    """TLS 1.3 only, the benchmark certificate as the one trust anchor, ALPN
    for PROTO (h1: http/1.1, h2: h2)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.maximum_version = ssl.TLSVersion.TLSv1_3
    ctx.load_verify_locations(cafile=cafile)
    ctx.set_alpn_protocols(["h2"] if proto == "h2" else ["http/1.1"])
    return ctx


def tls_connect(ctx, host, port, timeout, proto):
    raw = socket.create_connection((host, port), timeout=timeout)
    try:
        s = ctx.wrap_socket(raw, server_hostname=host)
    except BaseException:
        raw.close()
        raise
    want = "h2" if proto == "h2" else "http/1.1"
    got = s.selected_alpn_protocol()
    # An HTTP/1.1 server may skip ALPN; h2 over TLS needs it (RFC 9113 §3.2).
    if got != want and not (proto == "h1" and got is None):
        s.close()
        raise RuntimeError(f"ALPN chose {got!r}, want {want!r}")
    if s.version() != "TLSv1.3":
        s.close()
        raise RuntimeError(f"negotiated {s.version()}, want TLSv1.3")
    return s


# --- HTTP/1.1 ---------------------------------------------------------------


def get_h1(sock, authority, path, want_length):
    """One keep-alive GET on sock (idle_reads.get); the body and its status."""
    return get(sock, authority, path, want_length), {"status": 200}


# --- HTTP/2 (RFC 9113, HPACK RFC 7541) --------------------------------------

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
END_STREAM, ACK, END_HEADERS, PADDED, PRIORITY_FLAG = 0x1, 0x1, 0x4, 0x8, 0x20
# RFC 7541 Appendix A: static table entries 8..14 are :status values.
STATIC_STATUS = {8: 200, 9: 204, 10: 206, 11: 304, 12: 400, 13: 404, 14: 500}


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def hpack_int(value, prefix_bits, first):
    """RFC 7541 §5.1: VALUE with a PREFIX_BITS prefix under the bits FIRST."""
    top = (1 << prefix_bits) - 1
    if value < top:
        return bytes([first | value])
    out = [first | top]
    value -= top
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def hpack_literal(name_index, value):
    """RFC 7541 §6.2.2: literal without indexing, indexed name, raw string."""
    raw = value.encode()
    return hpack_int(name_index, 4, 0x00) + hpack_int(len(raw), 7, 0x00) + raw


def request_block(authority, path):
    # 0x82 :method GET, 0x87 :scheme https (static indexes 2 and 7); :path
    # (name index 4) and :authority (name index 1) as literals.
    return b"\x82\x87" + hpack_literal(4, path) + hpack_literal(1, authority)


def hpack_read_int(buf, i, prefix_bits):
    top = (1 << prefix_bits) - 1
    value = buf[i] & top
    i += 1
    if value < top:
        return value, i
    shift = 0
    while True:
        b = buf[i]
        i += 1
        value += (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, i


def response_status(block):
    """:status from the first field of a response header block if the server
    sent it indexed or as a raw literal; None if Huffman-coded (this client
    has no Huffman table; the body check still holds)."""
    i = 0
    while i < len(block) and block[i] & 0xE0 == 0x20:  # dynamic table size update
        _, i = hpack_read_int(block, i, 5)
    if i >= len(block):
        raise RuntimeError("empty response header block")
    b = block[i]
    if b & 0x80:
        index, _ = hpack_read_int(block, i, 7)
        if index in STATIC_STATUS:
            return STATIC_STATUS[index]
        raise RuntimeError(f"first response header is static index {index}, not :status")
    index, i = hpack_read_int(block, i, 6 if b & 0x40 else 4)
    if index not in STATIC_STATUS:
        raise RuntimeError(f"first response header has name index {index}, not :status")
    huffman = block[i] & 0x80
    length, i = hpack_read_int(block, i, 7)
    return None if huffman else int(block[i:i + length])


class H2:
    """One HTTP/2 connection's frame reader over an SSLSocket."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""
        self.goaway = None

    def read_frame(self):
        while True:
            if len(self.buf) >= 9:
                length = int.from_bytes(self.buf[:3], "big")
                if len(self.buf) >= 9 + length:
                    kind, flags = self.buf[3], self.buf[4]
                    stream = int.from_bytes(self.buf[5:9], "big") & 0x7FFFFFFF
                    payload = self.buf[9:9 + length]
                    self.buf = self.buf[9 + length:]
                    return kind, flags, stream, payload
            chunk = self.sock.recv(65536)
            if not chunk:
                raise RuntimeError("connection closed mid-response")
            self.buf += chunk

    def get(self, authority, path):
        self.sock.sendall(PREFACE + frame(SETTINGS, 0, 0)
                          + frame(HEADERS, END_STREAM | END_HEADERS, 1, request_block(authority, path)))
        body = b""
        info = {"status": None, "server_settings": None, "settings_acked": False,
                "frames": {}}
        while True:
            kind, flags, stream, payload = self.read_frame()
            info["frames"][kind] = info["frames"].get(kind, 0) + 1
            if kind == SETTINGS:
                if flags & ACK:
                    info["settings_acked"] = True
                else:
                    info["server_settings"] = {
                        int.from_bytes(payload[j:j + 2], "big"): int.from_bytes(payload[j + 2:j + 6], "big")
                        for j in range(0, len(payload) - 5, 6)}
                    self.sock.sendall(frame(SETTINGS, ACK, 0))
            elif kind == PING:
                if not flags & ACK:
                    self.sock.sendall(frame(PING, ACK, 0, payload))
            elif kind == GOAWAY:
                last, code = struct.unpack(">II", payload[:8])
                raise RuntimeError(f"GOAWAY (last stream {last & 0x7FFFFFFF}, error {code})")
            elif kind == RST_STREAM and stream == 1:
                raise RuntimeError(f"RST_STREAM on stream 1, error {int.from_bytes(payload[:4], 'big')}")
            elif kind == HEADERS and stream == 1:
                block = payload
                if flags & PADDED:
                    block = block[1:len(block) - block[0]]
                if flags & PRIORITY_FLAG:
                    block = block[5:]
                if not flags & END_HEADERS:
                    raise RuntimeError("response headers span CONTINUATION frames")
                if info["status"] is None:
                    info["status"] = response_status(block)
                    if info["status"] not in (None, 200):
                        raise RuntimeError(f":status {info['status']}, want 200")
                if flags & END_STREAM:
                    break
            elif kind == DATA and stream == 1:
                data = payload
                if flags & PADDED:
                    data = data[1:len(data) - data[0]]
                body += data
                if flags & END_STREAM:
                    break
            # WINDOW_UPDATE, PRIORITY and anything else: nothing to do. A
            # 1 KiB body fits the default 65,535-byte windows.
        info["frames"] = {str(k): v for k, v in info["frames"].items()}
        return body, info

    def drain(self):
        """Read what has arrived without waiting; False if the server has
        closed (EOF, close_notify, reset) or sent GOAWAY."""
        self.sock.setblocking(False)
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return False
                self.buf += chunk
        except (ssl.SSLWantReadError, BlockingIOError):
            pass
        except (ssl.SSLZeroReturnError, OSError):
            return False
        while len(self.buf) >= 9:
            length = int.from_bytes(self.buf[:3], "big")
            if len(self.buf) < 9 + length:
                break
            if self.buf[3] == GOAWAY:
                self.goaway = self.buf[9:9 + length]
                return False
            self.buf = self.buf[9 + length:]
        return True


def drain_h1(sock):
    """Read what has arrived without waiting; False if the server closed."""
    sock.setblocking(False)
    try:
        while True:
            if not sock.recv(65536):
                return False
    except (ssl.SSLWantReadError, BlockingIOError):
        return True
    except (ssl.SSLZeroReturnError, OSError):
        return False


def open_after_settle(conns):
    """How many of CONNS (pairs of SSLSocket and H2 or None) the server still
    holds open: poll all at once; any with input are read to tell a TLS
    session ticket or a PING from close_notify, EOF or GOAWAY."""
    poller = select.poll()
    by_fd = {}
    for s, h2 in conns:
        by_fd[s.fileno()] = (s, h2)
        poller.register(s, select.POLLIN | select.POLLRDHUP)
    alive = len(conns)
    for fd, events in poller.poll(0):
        s, h2 = by_fd[fd]
        if events & (select.POLLHUP | select.POLLERR | select.POLLRDHUP):
            alive -= 1
        elif not (h2.drain() if h2 else drain_h1(s)):
            alive -= 1
    return alive


# --- subcommands ------------------------------------------------------------


def raise_nofile(want):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < want:
        if hard != resource.RLIM_INFINITY and hard < want:
            raise RuntimeError(f"need {want} open files but RLIMIT_NOFILE's hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def cmd_idle(a):
    host = "127.0.0.1"
    authority = f"{host}:{a.port}"
    raise_nofile(a.conns + 64)
    with open(a.file, "rb") as f:
        want = f.read()
    ctx = None if a.plain else tls_context(a.cafile, a.proto)

    def connect():
        if a.plain:
            return socket.create_connection((host, a.port), timeout=a.timeout)
        return tls_connect(ctx, host, a.port, a.timeout, a.proto)

    def one_get(s):
        if a.proto == "h2":
            h2 = H2(s)
            body, info = h2.get(authority, a.path)
        else:
            h2 = None
            body, info = get_h1(s, authority, a.path, len(want))
        if body != want:
            raise RuntimeError(f"GET {a.path} returned {len(body)} bytes that differ from {a.file}")
        return h2, info

    # Warm-up: one request on its own connection, checked byte for byte and
    # closed before the baseline.
    s = connect()
    try:
        _, warm = one_get(s)
        tls = None if a.plain else {"version": s.version(), "cipher": s.cipher()[0],
                                    "alpn": s.selected_alpn_protocol()}
    finally:
        s.close()
    time.sleep(a.pause)
    before = tree_memory(a.pid)
    conns = []
    t0 = time.monotonic()
    try:
        for i in range(a.conns):
            try:
                s = connect()
                conns.append((s, None))
                conns[-1] = (s, one_get(s)[0])
            except (OSError, RuntimeError) as e:
                raise RuntimeError(f"connection {i + 1} of {a.conns}: {e}") from e
        open_s = time.monotonic() - t0
        time.sleep(a.settle)
        after = tree_memory(a.pid)
        alive = open_after_settle(conns)
    finally:
        for s, _ in conns:
            s.close()
    delta = after["total"]["VmRSS"] - before["total"]["VmRSS"]
    print(json.dumps({
        "server": a.server, "proto": a.proto, "trial": a.trial,
        "path": a.path, "size_bytes": len(want), "connections": a.conns,
        "alive_after_settle": alive, "open_s": round(open_s, 4), "settle_s": a.settle,
        "tls": tls, "warmup_response": warm,
        "before": before, "after": after,
        "rss_delta_bytes": delta,
        "idle_bytes_per_conn": delta / a.conns,
        "rss_anon_delta_bytes": after["total"]["RssAnon"] - before["total"]["RssAnon"],
        "processes_before": len(before["processes"]), "processes_after": len(after["processes"]),
    }))


def cmd_summary(a):
    with open(a.sample) as f:
        s = json.loads(f.readline())
    b, t = s["before"]["total"], s["after"]["total"]
    print(f"{s['idle_bytes_per_conn']:,.0f} B/conn (RSS {b['VmRSS'] >> 10} -> {t['VmRSS'] >> 10} KiB "
          f"over {s['processes_after']} process(es), {s['alive_after_settle']}/{s['connections']} "
          f"still open, opened in {s['open_s']:.1f} s, {s['tls']['version']} {s['tls']['cipher']})")


def run(*argv):
    try:
        p = subprocess.run(list(argv), capture_output=True, text=True)
    except OSError:
        return None
    return (p.stdout + p.stderr).strip() if p.returncode == 0 else None


def cmd_meta(a):
    model = None
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    servers = {}
    for spec in a.server:
        name, _, path = spec.partition("=")
        version = run(path, "-v" if name == "nginx" else "--version") or ""
        servers[name] = {"path": path, "sha256": sha256(path),
                         "version": version.splitlines()[0] if version else None}
    with open("/proc/loadavg") as f:
        loadavg = f.read().split()[:3]
    print(json.dumps({
        "schema": "servery-idle-tls/1",
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": a.command,
        "git_commit": run("git", "-C", a.repo, "rev-parse", "HEAD"),
        "git_dirty": bool(run("git", "-C", a.repo, "status", "--porcelain", "--untracked-files=no")),
        "machine": {"nproc": a.nproc, "cpu_model": model, "hostname": platform.node(),
                    "loadavg_at_start": [float(x) for x in loadavg]},
        "kernel": platform.release(),
        "python": platform.python_version(),
        "openssl": ssl.OPENSSL_VERSION,
        "settings": json.loads(a.settings),
        "servers": servers,
        "skipped": a.skipped or [],
    }))


def cmd_report(a):
    with open(a.meta) as f:
        meta = json.load(f)
    samples = []
    with open(a.samples) as f:
        for line in f:
            if line.strip():
                samples.append(json.loads(line))
    with open("/proc/loadavg") as f:
        meta["machine"]["loadavg_at_end"] = [float(x) for x in f.read().split()[:3]]
    st = meta["settings"]
    medians = []
    for proto in st["protos"]:
        for server in meta["servers"]:
            mine = [s for s in samples if s["server"] == server and s["proto"] == proto]
            if not mine:
                continue
            per_conn = [s["idle_bytes_per_conn"] for s in mine]
            medians.append({
                "server": server, "proto": proto, "trials": len(mine),
                "idle_bytes_per_conn": median(per_conn),
                "min": min(per_conn), "max": max(per_conn),
                "rss_anon_bytes_per_conn": median(s["rss_anon_delta_bytes"] / s["connections"] for s in mine),
                "closed_early": sum(s["connections"] - s["alive_after_settle"] for s in mine),
            })
    for line in meta["skipped"]:
        print(f"SKIPPED: {line}")
    if meta["skipped"]:
        print()
    print(f"Medians of {st['trials']} trial(s): {st['conns']} idle TLS 1.3 connections after one "
          f"GET of a {st['size_bytes']}-byte file each, {st['settle_s']} s settle; RSS of the "
          f"server's whole process tree; one worker on CPU {st['server_cpu']}, client on CPU "
          f"{st['client_cpu']}.")
    print()
    print("| Server | Proto | Bytes per idle connection | Min–max | RssAnon B/conn | Trials | Closed early |")
    print("|---|---|--:|--:|--:|--:|--:|")
    for m in medians:
        print(f"| {m['server']} | {m['proto']} | {fmt(m['idle_bytes_per_conn'], ',.0f')} | "
              f"{m['min']:,.0f}–{m['max']:,.0f} | {fmt(m['rss_anon_bytes_per_conn'], ',.0f')} | "
              f"{m['trials']} | {m['closed_early']} |")
    print()
    print("| Trial | Proto | Server | Bytes per idle connection | RSS before KiB | RSS after KiB | Still open |")
    print("|--:|---|---|--:|--:|--:|--:|")
    for s in samples:
        print(f"| {s['trial']} | {s['proto']} | {s['server']} | {s['idle_bytes_per_conn']:,.0f} | "
              f"{s['before']['total']['VmRSS'] >> 10:,} | {s['after']['total']['VmRSS'] >> 10:,} | "
              f"{s['alive_after_settle']}/{s['connections']} |")
    closed = sum(m["closed_early"] for m in medians)
    if closed:
        print()
        print(f"Note: {closed} connection(s) were closed by a server before the second RSS read; "
              f"those rows do not measure idle connections alone.")
    write_results(a.out, meta, samples, medians)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)

    i = sub.add_parser("idle")
    i.add_argument("--pid", type=int, required=True, help="the server's top process")
    i.add_argument("--port", type=int, required=True)
    i.add_argument("--proto", choices=("h1", "h2"), required=True)
    i.add_argument("--path", required=True)
    i.add_argument("--file", required=True, help="the file the server serves at --path")
    i.add_argument("--cafile", help="the server's self-signed certificate (PEM); not with --plain")
    i.add_argument("--plain", action="store_true",
                   help="no TLS: HTTP/1.1, or h2c by prior knowledge with --proto h2")
    i.add_argument("--conns", type=int, required=True)
    i.add_argument("--settle", type=float, default=2.0)
    i.add_argument("--pause", type=float, default=0.2, help="seconds after the warm-up")
    i.add_argument("--timeout", type=float, default=10.0)
    i.add_argument("--server", required=True)
    i.add_argument("--trial", type=int, required=True)

    m = sub.add_parser("meta")
    m.add_argument("--repo", required=True)
    m.add_argument("--command", required=True)
    m.add_argument("--nproc", type=int, required=True)
    m.add_argument("--settings", required=True, help="JSON object")
    m.add_argument("--server", action="append", default=[], help="NAME=PATH")
    m.add_argument("--skipped", action="append", help="a line saying what was skipped and why")

    r = sub.add_parser("report")
    r.add_argument("--meta", required=True)
    r.add_argument("--samples", required=True)
    r.add_argument("--out", required=True)

    sm = sub.add_parser("summary", help="one line about one sample file")
    sm.add_argument("sample")

    a = p.parse_args()
    try:
        {"idle": cmd_idle, "meta": cmd_meta, "report": cmd_report, "summary": cmd_summary}[a.cmd](a)
    except (OSError, RuntimeError, ssl.SSLError) as e:
        print(f"idle_tls.py {a.cmd}: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
