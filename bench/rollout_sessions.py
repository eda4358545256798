#!/usr/bin/env python3
"""Prints bench/rollout-profile.sh's session count (OPSBOOK_BENCH_TRACE=sessions) from
`strace -f -s 4000 -e trace=sendto` of one rollout on stdin: every remote command opsbook
asked a host's ssh master to run as a session (`MUX_C_NEW_SESSION`, 0x10000002, in OpenSSH's
PROTOCOL.mux), how many a host, and the first host's in order, each shortened to what it does.

    strace … | python3 bench/rollout_sessions.py HOSTS
"""
import re
import sys

NEW_SESSION = r"\20\0\0\2"


def what(command):
    """A remote command in a few words: a file script's arguments, else its first words."""
    command = command.replace("\\n", "\n").replace('\\"', '"')
    tail = re.search(r"' sh (.*)$", command, re.S)
    if tail and command.lstrip().startswith(("env timeout", "sh -c")):
        return "file script: " + tail.group(1)[:100]
    if "journalctl" in command:
        n = command.count("journalctl --no-pager")
        return f"journalctl ({n} quer{'y' if n == 1 else 'ies'})"
    if "opsbook/locks" in command or "d=/run/opsbook" in command:
        return "change lock"
    words = re.sub(r"^(env )?timeout -k 2 [0-9.]+s ", "", command).split()
    return " ".join(words[:4])[:100]


def main(hosts):
    commands = []
    for line in sys.stdin:
        if "sendto(" not in line or NEW_SESSION not in line:
            continue
        body = line.split('"', 1)[1].rsplit('", ', 1)[0]
        # The session's command is the message's last string, after its length.
        found = re.search(r"(env timeout|timeout -k|sh -c|systemd-cat)(.*)$", body)
        commands.append(what(found.group(0)) if found else "?")
    per_host = [c for c in commands if c != "change lock"]
    print(f"remote sessions: {len(commands)} in all, {len(commands) - len(per_host)} for the change locks; "
          f"{len(per_host) / hosts:.1f} a host")
    first = per_host[: round(len(per_host) / hosts)]
    print("the first host's, in order:")
    for c in first:
        print(f"  {c}")


if __name__ == "__main__":
    main(int(sys.argv[1]))
