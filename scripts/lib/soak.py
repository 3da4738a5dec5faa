#!/usr/bin/env python3
"""Drives one filesystem server with a long stream of mixed MCP calls (see scripts/soak).

Keeps WINDOW requests in flight, chooses each call from a seeded mix (reads, writes, edits,
listings, moves, deletes, restores, history steps, searches and, when the pipe mode is on,
pipelines), and every REPORT calls prints resident memory, open descriptors, child processes and
latency percentiles. Every id must be answered exactly once; anything else is a failure.
"""

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time

WINDOW = 16
REPORT = 10_000


def proc_status(pid, field):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def descriptors(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def children(pid):
    count = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                count += 1
        except (OSError, IndexError, ValueError):
            pass
    return count


def percentile(sorted_values, p):
    if not sorted_values:
        return 0.0
    i = min(len(sorted_values) - 1, int(round(p / 100 * (len(sorted_values) - 1))))
    return sorted_values[i]


class Mix:
    """Chooses calls; keeps just enough state for them to mostly succeed."""

    def __init__(self, seed, pipe, fs):
        self.rng = random.Random(seed)
        self.pipe = pipe
        self.fs = fs
        self.files = [f"d{i % 8}/f{i}.txt" for i in range(64)]
        self.trash = []

    def next(self):
        r = self.rng.random()
        path = self.rng.choice(self.files)
        if self.pipe and (not self.fs or r < 0.2):
            command = self.rng.choice([
                "ls",
                f"tail -n 5 {path}",
                "rg -c line d0",
                "fd -e txt | sort | head -n 5",
                "awk 'BEGIN{print 1}' | tr 1 2",
                f"wc -c {path}",
            ])
            return "shelpa_pipe", {"command": command}
        if not self.fs:
            return "shelpa_write", {"path": path, "content": f"line {self.rng.random()}\n"}
        if r < 0.35:
            return "read_text_file", {"path": path}
        if r < 0.55:
            return "write_file", {"path": path, "content": f"line {self.rng.random()}\n" * 8}
        if r < 0.62:
            return "edit_file", {"path": path, "edits": [{"oldText": "line", "newText": "line"}],
                                 "dryRun": True}
        if r < 0.70:
            return "list_directory", {"path": path.split("/")[0]}
        if r < 0.73:
            return "directory_tree", {"path": "."}
        if r < 0.78:
            other = self.rng.choice(self.files)
            return "move_file", {"source": path, "destination": other + ".moved"}
        if r < 0.82:
            return "delete_file", {"path": path}
        if r < 0.85:
            return "list_trash", {}
        if r < 0.88:
            return "search_file", {"path": path}
        if r < 0.92:
            return "undo_file", {"path": path}
        if r < 0.95:
            return "redo_file", {"path": path}
        return "create_directory", {"path": f"d{self.rng.randrange(8)}/sub"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--calls", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--csv")
    ap.add_argument("flags", nargs="*")
    args = ap.parse_args()

    root = tempfile.mkdtemp(prefix="soak-")
    for i in range(8):
        os.makedirs(os.path.join(root, f"d{i}"), exist_ok=True)
    for i in range(64):
        with open(os.path.join(root, f"d{i % 8}/f{i}.txt"), "w") as f:
            f.write("line one\nline two\n")

    proc = subprocess.Popen(
        [args.bin, "--root", root, *args.flags],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        bufsize=0,
    )
    out = proc.stdout
    inp = proc.stdin

    def send(msg):
        inp.write((json.dumps(msg) + "\n").encode())

    send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
          "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                     "clientInfo": {"name": "soak", "version": "1"}}})
    init = json.loads(out.readline())
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    send({"jsonrpc": "2.0", "id": -1, "method": "tools/list"})
    listed = json.loads(out.readline())
    tools = {t["name"] for t in listed["result"]["tools"]}
    pipe = "shelpa_pipe" in tools
    fs = "read_text_file" in tools
    mix = Mix(args.seed, pipe, fs)
    print(f"server: {init['result']['serverInfo']}, {len(tools)} tools, root {root}")

    sent_at = {}
    latencies = []
    lock = threading.Condition()
    in_flight = [0]
    failures = []
    answered = set()
    errors = [0]
    garbage_answers = [0]

    def reader():
        while True:
            line = out.readline()
            if not line:
                return
            msg = json.loads(line)
            rid = msg.get("id")
            if rid is None:
                # The answer to a line of garbage (protocol abuse mixed into the stream).
                with lock:
                    garbage_answers[0] += 1
                    lock.notify_all()
                continue
            with lock:
                if rid in answered:
                    failures.append(f"id {rid} answered twice")
                answered.add(rid)
                start = sent_at.pop(rid, None)
                if start is None:
                    failures.append(f"reply to unknown id {rid}")
                else:
                    latencies.append(time.perf_counter() - start)
                if msg.get("result", {}).get("isError"):
                    errors[0] += 1
                in_flight[0] -= 1
                lock.notify_all()

    t = threading.Thread(target=reader, daemon=True)
    t.start()

    csv = open(args.csv, "w") if args.csv else None
    header = "calls,rss_kib,peak_rss_kib,fds,children,p50_ms,p90_ms,p99_ms,max_ms,tool_errors"
    if csv:
        csv.write(header + "\n")
    print(header)
    began = time.time()
    garbage = [0]
    for i in range(1, args.calls + 1):
        with lock:
            while in_flight[0] >= WINDOW:
                if not lock.wait(timeout=60):
                    failures.append(f"no reply for 60 s at call {i}")
                    break
            if failures:
                break
            in_flight[0] += 1
            sent_at[i] = time.perf_counter()
        if i % 97 == 0:
            # Protocol abuse in the same stream: malformed JSON, a request without a method, a
            # batch outside 2025-03-26. Each must get one error with id null and change nothing.
            send_garbage = [b"{not json\n", b'{"jsonrpc":"2.0"}\n', b"[]\n"][(i // 97) % 3]
            inp.write(send_garbage)
            garbage[0] += 1
        name, arguments = mix.next()
        send({"jsonrpc": "2.0", "id": i, "method": "tools/call",
              "params": {"name": name, "arguments": arguments}})
        if i % REPORT == 0:
            with lock:
                while in_flight[0] > 0 and lock.wait(timeout=60):
                    pass
                window = sorted(latencies)
                latencies.clear()
            pid = proc.pid
            row = [i, proc_status(pid, "VmRSS:"), proc_status(pid, "VmHWM:"), descriptors(pid),
                   children(pid)] + [round(percentile(window, p) * 1000, 3) for p in (50, 90, 99, 100)] + [errors[0]]
            line = ",".join(str(v) for v in row)
            print(line, flush=True)
            if csv:
                csv.write(line + "\n")
                csv.flush()
        if proc.poll() is not None:
            failures.append(f"server exited with {proc.returncode} at call {i}")
            break
    with lock:
        while in_flight[0] > 0 and lock.wait(timeout=60):
            pass
        missing = len(sent_at)
    inp.close()
    proc.wait(timeout=60)
    shutil.rmtree(root, ignore_errors=True)
    print(f"{args.calls} calls in {time.time() - began:.1f} s; unanswered {missing}; "
          f"tool errors {errors[0]} (expected: moves onto taken names, undo without history…)")
    if missing:
        failures.append(f"{missing} calls never answered")
    if garbage_answers[0] != garbage[0]:
        failures.append(f"{garbage[0]} lines of garbage got {garbage_answers[0]} answers")
    if failures:
        print("FAILED: " + "; ".join(failures[:10]), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
