#!/usr/bin/env python3
"""Prints bench/rollout-profile.sh's table from `perf script -F comm,tid,ip,sym` on stdin: the
recorded rollout's samples (opsbook's threads together) put in the first phase whose frame is
on their stack, in ms of CPU a host (2 kHz: a sample is 0.5 ms).

    perf script … | python3 bench/rollout_profile.py HOSTS
"""
import collections
import re
import sys

# (phase, frames that mark it); the first phase with a frame on a sample's stack takes it.
PHASES = [
    ("loader and exit", ("_dl_start", "_dl_relocate_object", "exit_group", "do_exit")),
    ("command line", ("clap_builder",)),
    ("Rhai: library and verbs built", ("register_lazy_functions", "add_manifest", "verbs::registry::modules")),
    ("Rhai: a module imported (parse and top level)", ("CatalogResolver",)),
    ("Rhai: parsing", ("rhai::parser::",)),
    ("engine built for a host", ("engine::build",)),
    ("remote sessions (ssh mux, child I/O)", ("opsbook_world::ssh", "mux::", "Mux", "session::run")),
    ("HTTP (gate queries, probes)", ("send_answer", "hyper", "reqwest")),
    ("templates (minijinja)", ("minijinja",)),
    ("JSON / TOML / YAML", ("serde_json", "toml::", "saphyr")),
    ("Rhai: evaluation", ("rhai::eval", "rhai::func", "rhai::api::call_fn", "eval_ast")),
    ("tokio (I/O threads, timers)", ("tokio::",)),
    ("page faults elsewhere", ("asm_exc_page_fault",)),
    ("threads started", ("clone3", "start_thread")),
]


def phase(stack):
    for name, marks in PHASES:
        if any(m in f for f in stack for m in marks):
            return name
    return "other (kernel: syscalls, scheduling)"


def main(hosts):
    counts, stack, total = collections.Counter(), None, 0
    for line in sys.stdin:
        if not line.strip():
            if stack is not None:
                counts[phase(stack)] += 1
                total += 1
            stack = None
            continue
        head = re.match(r"^\s*(\S+)\s+\d+\s*$", line)
        if head:
            stack = [] if head.group(1).startswith("opsbook") else None
        elif stack is not None:
            stack.append(line.strip())
    print(f"{'phase':<48} {'ms a host':>9} {'share':>6}")
    for name, count in counts.most_common():
        print(f"{name:<48} {count * 0.5 / hosts:9.2f} {100 * count / total:5.1f}%")
    print(f"{'all':<48} {total * 0.5 / hosts:9.2f}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(int(sys.argv[1]))
