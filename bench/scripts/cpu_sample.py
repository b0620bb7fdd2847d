#!/usr/bin/env python3
"""One sample of server CPU per request, as a JSON line, for the interleaved CPU scripts
(cpu-per-request.sh, access-log-cost.sh).

usage: cpu_sample.py NAME TRIAL U0 S0 U1 S1 CLK_TCK RUN.json [FIELD=INT ...]
  U0 S0 / U1 S1: the server's utime and stime in ticks before and after the run;
  RUN.json: servery-load's --json output for the run; FIELD=INT: extra integer fields.
"""
import json
import sys

name, trial = sys.argv[1], int(sys.argv[2])
u0, s0, u1, s1, clk = map(int, sys.argv[3:8])
run = json.load(open(sys.argv[8]))
n = run["requests"]
sample = {"variant": name, "trial": trial, "requests": n, "rps": run["rps"]}
for extra in sys.argv[9:]:
    key, value = extra.split("=", 1)
    sample[key] = int(value)
sample.update({
    "user_us_per_req": (u1 - u0) / clk / n * 1e6,
    "sys_us_per_req": (s1 - s0) / clk / n * 1e6,
    "cpu_us_per_req": (u1 - u0 + s1 - s0) / clk / n * 1e6,
})
print(json.dumps(sample))
