#!/usr/bin/env python3
# Runs a command and prints its peak VmRSS, RssAnon, RssFile and RssShmem, sampled from /proc.
import subprocess, sys, time
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
peak = {"VmRSS": 0, "RssAnon": 0, "RssFile": 0, "RssShmem": 0}
while p.poll() is None:
    try:
        for line in open(f"/proc/{p.pid}/status"):
            k = line.split(":")[0]
            if k in peak: peak[k] = max(peak[k], int(line.split()[1]))
    except Exception: pass
    time.sleep(0.02)
print(" ".join(f"{k}={v//1024}MiB" for k, v in peak.items()))
