#!/usr/bin/env bash
# journal::read of 100,000 entries against `journalctl -o json` alone, side by side in one
# hyperfine run, with a real journald. Runs inside the private host (bench/journal.sh).
set -euo pipefail
state=$1
seq -f 'benchmark line %g with some words in it like a real log line would have' 1 100000 | systemd-cat -t benchgen
for _ in $(seq 100); do
  n=$(journalctl --no-pager -o cat SYSLOG_IDENTIFIER=benchgen | wc -l)
  [ "$n" -ge 100000 ] && break
  sleep 0.2
done
echo "entries in the journal: $n" > "$state/entries.txt"
mkdir -p "$state/runbooks"
cat > "$state/runbooks/read100k.rhai" <<'RHAI'
let e = journal::read(#{ identifier: "benchgen", lines: 100000 });
if e.len() != 100000 { throw `read ${e.len()} entries`; }
RHAI
cd "$state"
hyperfine -N --warmup 2 --runs 10 --export-json "$state/journal.json" \
  -n "journalctl -o json (100k entries)" "journalctl --no-pager -o json SYSLOG_IDENTIFIER=benchgen -n 100000" \
  -n "opsbook journal::read (100k entries)" "$OPSBOOK_BIN --format tap run read100k" >/dev/null
