#!/usr/bin/env python3
"""A small open-loop load generator for `opsbook serve` (oha is not in Debian).

Usage: serve_load.py URL RATE SECONDS
Sends GET requests at RATE per second (on a fixed schedule, whatever the answers take, over
a few keep-alive connections) for SECONDS, then prints the latency median, p90, p99, max and
the count of answers that were not 200. Latency is measured from each request's scheduled
time, so a slow server is not hidden by the generator waiting for it.
"""
import http.client
import sys
import threading
import time
import urllib.parse


def main():
    url, rate, seconds = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    parts = urllib.parse.urlsplit(url)
    path = parts.path or "/"
    workers = 8
    total = int(rate * seconds)
    start = time.monotonic() + 0.2
    latencies, errors = [], [0]
    lock = threading.Lock()

    def worker(index):
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=5)
        for n in range(index, total, workers):
            due = start + n / rate
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            try:
                conn.request("GET", path)
                answer = conn.getresponse()
                answer.read()
                ok = answer.status == 200
            except Exception:
                conn.close()
                conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=5)
                ok = False
            took = time.monotonic() - due
            with lock:
                latencies.append(took)
                if not ok:
                    errors[0] += 1

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    latencies.sort()
    q = lambda p: latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000
    print(f"{path:<10} {rate:.0f} req/s x {seconds:.0f} s: median {q(0.5):.2f} ms, p90 {q(0.9):.2f} ms, "
          f"p99 {q(0.99):.2f} ms, max {latencies[-1] * 1000:.2f} ms, not 200: {errors[0]}")


if __name__ == "__main__":
    main()
