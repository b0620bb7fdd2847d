#!/usr/bin/env python3
"""Helper for bench/scripts/idle-reads.sh; standard library only.

Subcommands (each prints one JSON object on stdout unless said otherwise):

  idle    The idle-memory client. Warm the server up with one request, read
          the server's VmRSS, open --conns keep-alive connections that each
          make one GET and read the whole (Content-Length framed) response,
          keep them open, sleep --settle seconds, read VmRSS again, check that
          every connection is still open, then close them all.
  load    Turn one servery-load JSON report plus the server's CPU ticks
          around it into a sample (req/s, server CPU µs per request).
  meta    Identity of the run: command, git commit, machine, kernel, the
          sha256 of every binary.
  summary One progress line about one sample.
  report  Print the table of medians (markdown, stdout) and write the JSON
          file with the identity, every raw sample and the medians.
"""

import argparse
import hashlib
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time

STATUS_FIELDS = ("VmRSS", "RssAnon", "RssFile", "RssShmem", "Threads")


def proc_status(pid):
    """The memory fields of /proc/PID/status (proc(5)); sizes in bytes."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in STATUS_FIELDS:
                parts = value.split()
                n = int(parts[0])
                out[key] = n * 1024 if len(parts) > 1 and parts[1] == "kB" else n
    return out


def get(sock, host, path, want_length):
    """One keep-alive GET on sock; read exactly the framed response."""
    req = f"GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: idle-reads\r\n\r\n"
    sock.sendall(req.encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError(f"connection closed before the response head ({len(buf)} bytes read)")
        buf += chunk
        if len(buf) > 65536 and b"\r\n\r\n" not in buf:
            raise RuntimeError("response head over 64 KiB")
    head, _, body = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = lines[0].split(" ", 2)
    if len(status) < 2 or status[1] != "200":
        raise RuntimeError(f"status line {lines[0]!r}, want 200")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if "content-length" not in headers:
        raise RuntimeError("response has no Content-Length")
    length = int(headers["content-length"])
    if length != want_length:
        raise RuntimeError(f"Content-Length {length}, want {want_length}")
    if "close" in headers.get("connection", "").lower():
        raise RuntimeError("server answered Connection: close; the connection would not idle")
    while len(body) < length:
        chunk = sock.recv(min(262144, length - len(body)))
        if not chunk:
            raise RuntimeError(f"connection closed after {len(body)} of {length} body bytes")
        body += chunk
    if len(body) != length:
        raise RuntimeError(f"{len(body) - length} bytes after the body")
    return body


def still_open(sock):
    """True unless the peer has closed or reset the connection (peek, no wait)."""
    # A socket with a timeout would poll for up to that long first.
    sock.settimeout(0)
    try:
        data = sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except BlockingIOError:
        return True
    except OSError:
        return False
    return bool(data)  # b"" is EOF


def cmd_idle(a):
    host = "127.0.0.1"
    with open(a.file, "rb") as f:
        want = f.read()
    length = len(want)
    # Warm-up: one request on its own connection, checked byte for byte and
    # closed before the baseline.
    with socket.create_connection((host, a.port), timeout=a.timeout) as s:
        if get(s, host, a.path, length) != want:
            raise RuntimeError(f"GET {a.path} returned bytes that differ from {a.file}")
    time.sleep(a.pause)
    before = proc_status(a.pid)
    socks = []
    t0 = time.monotonic()
    try:
        for i in range(a.conns):
            s = socket.create_connection((host, a.port), timeout=a.timeout)
            socks.append(s)
            try:
                get(s, host, a.path, length)
            except (OSError, RuntimeError) as e:
                raise RuntimeError(f"connection {i + 1} of {a.conns}: {e}") from e
        open_s = time.monotonic() - t0
        time.sleep(a.settle)
        after = proc_status(a.pid)
        alive = sum(1 for s in socks if still_open(s))
    finally:
        for s in socks:
            s.close()
    delta = after["VmRSS"] - before["VmRSS"]
    print(json.dumps({
        "kind": "idle", "variant": a.variant, "trial": a.trial, "case": a.case,
        "path": a.path, "size_bytes": length, "connections": a.conns,
        "alive_after_settle": alive, "open_s": round(open_s, 4), "settle_s": a.settle,
        "before": before, "after": after,
        "rss_delta_bytes": delta,
        "idle_bytes_per_conn": delta / a.conns,
        "rss_anon_delta_bytes": after.get("RssAnon", 0) - before.get("RssAnon", 0),
    }))


def cpu_times(path, cpu):
    """Busy and total ticks of one CPU from a copy of /proc/stat (proc(5))."""
    with open(path) as f:
        for line in f:
            fields = line.split()
            if fields[0] == f"cpu{cpu}":
                t = [int(x) for x in fields[1:]]
                # user nice system idle iowait irq softirq steal (guest is in user)
                total = sum(t[:8])
                return total - t[3] - t[4], total, t[7]
    raise RuntimeError(f"no cpu{cpu} line in {path}")


def cpu_window(a, cpu, own_s):
    """What CPU `cpu` did in the window: its busy seconds, the share of
    them that was not our process (others' work, interrupts), and steal."""
    b0, t0, s0 = cpu_times(a.stat_before, cpu)
    b1, t1, s1 = cpu_times(a.stat_after, cpu)
    busy_s = (b1 - b0) / a.clk_tck
    return {"cpu": cpu, "busy_s": busy_s, "total_s": (t1 - t0) / a.clk_tck,
            "steal_s": (s1 - s0) / a.clk_tck,
            "foreign_busy_s": max(0.0, busy_s - own_s)}


def cmd_load(a):
    with open(a.report) as f:
        r = json.load(f)
    ticks = a.ticks_after - a.ticks_before
    cpu_s = ticks / a.clk_tck
    client_s = a.client_ticks / a.clk_tck
    requests = r["requests"]
    print(json.dumps({
        "kind": "load", "variant": a.variant, "trial": a.trial, "case": "load-1k",
        "connections": r["connections"], "duration_s": r["duration_s"],
        "wall_s": a.wall_s, "requests": requests, "rps": r["rps"],
        "server_ticks": ticks, "server_cpu_s": cpu_s,
        "server_cpu_us_per_request": cpu_s * 1e6 / requests if requests else None,
        "server_cpu_util": cpu_s / a.wall_s if a.wall_s else None,
        "client_cpu_s": client_s,
        "server_cpu_window": cpu_window(a, a.server_cpu, cpu_s),
        "client_cpu_window": cpu_window(a, a.client_cpu, client_s),
        "latency_us": r["latency_us"], "errors": r["errors"],
        "pids_before": a.pids_before, "pids_after": a.pids_after,
        "servery_load_report": r,
    }))


def cmd_summary(a):
    f = sys.stdin if a.sample == "-" else open(a.sample)
    s = json.loads(f.readline())
    if s["kind"] == "idle":
        print(f"{s['idle_bytes_per_conn']:,.0f} B/conn (VmRSS {s['before']['VmRSS'] >> 10} -> "
              f"{s['after']['VmRSS'] >> 10} KiB, {s['alive_after_settle']}/{s['connections']} still open)")
    else:
        sw, cw = s["server_cpu_window"], s["client_cpu_window"]
        print(f"{s['rps']:,.0f} req/s, {s['server_cpu_us_per_request']:.2f} server CPU µs/req "
              f"({s['server_cpu_util']:.0%} of a CPU), {s['errors']['total']} errors; "
              f"other work: {sw['foreign_busy_s']:.2f} s on CPU {sw['cpu']}, "
              f"{cw['foreign_busy_s']:.2f} s on CPU {cw['cpu']}")


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def git(repo, *args):
    try:
        p = subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True)
    except OSError:
        return None
    return p.stdout.strip() if p.returncode == 0 else None


def cmd_meta(a):
    model = None
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    binaries = {}
    for spec in a.variant:
        name, _, path = spec.partition("=")
        binaries[name] = {"path": path, "sha256": sha256(path)}
    with open("/proc/loadavg") as f:
        loadavg = f.read().split()[:3]
    print(json.dumps({
        "schema": "servery-idle-reads/1",
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": a.command,
        "git_commit": git(a.repo, "rev-parse", "HEAD"),
        "git_dirty": bool(git(a.repo, "status", "--porcelain", "--untracked-files=no")),
        "machine": {"nproc": a.nproc, "cpu_model": model, "hostname": platform.node(),
                    "loadavg_at_start": [float(x) for x in loadavg]},
        "kernel": platform.release(),
        "clk_tck": a.clk_tck,
        "settings": json.loads(a.settings),
        "variants": list(binaries),
        "binaries": binaries,
        "load_generator": {"path": a.load_bin, "sha256": sha256(a.load_bin)},
    }))


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(v, spec):
    return "—" if v is None else format(v, spec)


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
    medians = {}
    for v in meta["variants"]:
        mine = [s for s in samples if s["variant"] == v]
        idle = {c: [s for s in mine if s["kind"] == "idle" and s["case"] == c]
                for c in ("idle-1k", "idle-64k")}
        load = [s for s in mine if s["kind"] == "load"]
        medians[v] = {
            "idle_bytes_per_conn_1k": median(s["idle_bytes_per_conn"] for s in idle["idle-1k"]),
            "idle_bytes_per_conn_64k": median(s["idle_bytes_per_conn"] for s in idle["idle-64k"]),
            "rps": median(s["rps"] for s in load),
            "server_cpu_us_per_request": median(s["server_cpu_us_per_request"] for s in load),
            "trials": len(load),
            "closed_idle_connections": sum(s["connections"] - s["alive_after_settle"]
                                           for c in idle.values() for s in c),
            "load_errors": sum(s["errors"]["total"] for s in load),
            # Share of the load window in which the server's and the client's
            # CPU ran something else: high means the req/s (less so the
            # CPU per request) is not the variant's alone.
            "other_work_share_server_cpu": median(
                s["server_cpu_window"]["foreign_busy_s"] / s["wall_s"] for s in load),
            "other_work_share_client_cpu": median(
                s["client_cpu_window"]["foreign_busy_s"] / s["wall_s"] for s in load),
        }
    st = meta["settings"]
    print(f"Medians of {st['trials']} trial(s); idle: {st['idle_conns']} connections, "
          f"{st['settle_s']} s settle; load: {st['load_conns']} connections, 1 KiB, "
          f"{st['duration_s']} s after {st['warmup_s']} s warm-up; server CPU {st['server_cpu']}, "
          f"client CPU {st['client_cpu']}.")
    print()
    print("| Variant | Idle B/conn 1k | Idle B/conn 64k | Req/s | Server CPU µs/req | Trials | Idle conns closed early | Load errors |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|")
    for v, m in medians.items():
        print(f"| {v} | {fmt(m['idle_bytes_per_conn_1k'], ',.0f')} | "
              f"{fmt(m['idle_bytes_per_conn_64k'], ',.0f')} | {fmt(m['rps'], ',.0f')} | "
              f"{fmt(m['server_cpu_us_per_request'], '.2f')} | {m['trials']} | "
              f"{m['closed_idle_connections']} | {m['load_errors']} |")
    noisy = [f"{s['variant']} trial {s['trial']}" for s in samples if s["kind"] == "load"
             and max(s["server_cpu_window"]["foreign_busy_s"],
                     s["client_cpu_window"]["foreign_busy_s"]) > 0.1 * s["wall_s"]]
    if noisy:
        print()
        print(f"Note: other work took over 10% of the server's or the client's CPU during "
              f"{len(noisy)} load run(s) ({', '.join(noisy)}); see other_work_share_* and "
              f"*_cpu_window in the JSON. Req/s there is not the variant's alone.")
    print()
    print("| Trial | Variant | Idle B/conn 1k | Idle B/conn 64k | Req/s | Server CPU µs/req |")
    print("|--:|---|--:|--:|--:|--:|")
    trials = sorted({s["trial"] for s in samples})
    for t in trials:
        for v in meta["variants"]:
            row = {s["case"]: s for s in samples if s["variant"] == v and s["trial"] == t}
            i1, i64, ld = row.get("idle-1k"), row.get("idle-64k"), row.get("load-1k")
            print(f"| {t} | {v} | {fmt(i1 and i1['idle_bytes_per_conn'], ',.0f')} | "
                  f"{fmt(i64 and i64['idle_bytes_per_conn'], ',.0f')} | "
                  f"{fmt(ld and ld['rps'], ',.0f')} | "
                  f"{fmt(ld and ld['server_cpu_us_per_request'], '.2f')} |")
    write_results(a.out, meta, samples, medians)


def write_results(path, meta, samples, medians):
    """The run's identity, every sample and the medians, as JSON at PATH."""
    meta["finished_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    meta["samples"] = samples
    meta["medians"] = medians
    with open(path, "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)

    i = sub.add_parser("idle")
    i.add_argument("--pid", type=int, required=True)
    i.add_argument("--port", type=int, required=True)
    i.add_argument("--path", required=True)
    i.add_argument("--file", required=True, help="the file the server serves at --path")
    i.add_argument("--conns", type=int, required=True)
    i.add_argument("--settle", type=float, default=1.0)
    i.add_argument("--pause", type=float, default=0.2, help="seconds after the warm-up")
    i.add_argument("--timeout", type=float, default=10.0)
    i.add_argument("--variant", required=True)
    i.add_argument("--trial", type=int, required=True)
    i.add_argument("--case", required=True)

    ld = sub.add_parser("load")
    ld.add_argument("--report", required=True)
    ld.add_argument("--variant", required=True)
    ld.add_argument("--trial", type=int, required=True)
    ld.add_argument("--ticks-before", type=int, required=True)
    ld.add_argument("--ticks-after", type=int, required=True)
    ld.add_argument("--client-ticks", type=int, required=True)
    ld.add_argument("--clk-tck", type=int, required=True)
    ld.add_argument("--wall-s", type=float, required=True)
    ld.add_argument("--pids-before", type=int, required=True)
    ld.add_argument("--pids-after", type=int, required=True)
    ld.add_argument("--stat-before", required=True, help="copy of /proc/stat before")
    ld.add_argument("--stat-after", required=True, help="copy of /proc/stat after")
    ld.add_argument("--server-cpu", type=int, required=True)
    ld.add_argument("--client-cpu", type=int, required=True)

    m = sub.add_parser("meta")
    m.add_argument("--repo", required=True)
    m.add_argument("--command", required=True)
    m.add_argument("--nproc", type=int, required=True)
    m.add_argument("--clk-tck", type=int, required=True)
    m.add_argument("--settings", required=True, help="JSON object")
    m.add_argument("--load-bin", required=True)
    m.add_argument("--variant", action="append", required=True, help="NAME=PATH")

    r = sub.add_parser("report")
    r.add_argument("--meta", required=True)
    r.add_argument("--samples", required=True)
    r.add_argument("--out", required=True)

    sm = sub.add_parser("summary", help="one line about one sample (a file or - for stdin)")
    sm.add_argument("sample")

    a = p.parse_args()
    try:
        {"idle": cmd_idle, "load": cmd_load, "meta": cmd_meta, "report": cmd_report,
         "summary": cmd_summary}[a.cmd](a)
    except (OSError, RuntimeError) as e:
        print(f"idle_reads.py {a.cmd}: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
