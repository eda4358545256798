#!/usr/bin/env bash
# The main thread's way through `opsbook run quick-check`, inside the private host with the four
# twins as real units (bench/twin-units.sh): an uprobe on the entry and the return of each
# step's function in the binary (found by name in its symbol table: a release build, not
# stripped), the process's exec and exit, and the scheduler's switches of its threads, recorded
# by tracefs over 20 runs; bench/timeline.py prints each step's median wall time and the part
# of it the main thread spent off its core (waiting for a reply, a lock, or a core), to
# timeline.txt. Runs inside the private host (bench/quick-check-timeline.sh).
set -euo pipefail
state=$1
source "$REPO/bench/twin-units.sh"
bin=$OPSBOOK_BIN
trace=/sys/kernel/tracing
mountpoint -q "$trace" || mount -t tracefs nodev "$trace"
was_on=$(cat "$trace/tracing_on")
echo 0 >"$trace/tracing_on"
echo >"$trace/uprobe_events"
symbols=$(nm -C "$bin")
# probe NAME FUNCTION [return]: FUNCTION's address in the file is its address less the text
# segment's offset between memory and file (readelf's first executable LOAD).
shift_=$(readelf -lW "$bin" | awk '$1 == "LOAD" && / R E / { print $3, $2; exit }' | { read -r vaddr offset; echo $((vaddr - offset)); })
probe() {
  local address
  address=$(grep -E " [tT] $2\$" <<<"$symbols" | head -1 | cut -d' ' -f1)
  [ -n "$address" ] || { echo "no function $2 in $bin" >&2; exit 1; }
  local offset
  offset=$(printf '0x%x' $((0x$address - shift_)))
  echo "p:opsbook/$1 $bin:$offset" >>"$trace/uprobe_events"
  [ "${3:-}" = return ] && echo "r:opsbook/${1}_end $bin:$offset" >>"$trace/uprobe_events"
  return 0
}
probe main 'opsbook::run'
probe command_line 'clap_builder::parser::parser::Parser::get_matches_with' return
probe session 'opsbook_fleet::session::Session::open' return
probe engine 'opsbook_engine::engine::build' return
probe compile 'opsbook_engine::runbook::compile' return
probe run 'opsbook_fleet::session::Session::run' return
probe units '<opsbook_world::systemd_dbus::SystemdDbus as opsbook_world::units::Units>::states' return
probe http 'opsbook_engine::verbs::context::Context::send_answer' return
echo 'prev_comm ~ "opsbook*" || next_comm ~ "opsbook*"' >"$trace/events/sched/sched_switch/filter"
for event in opsbook sched/sched_switch sched/sched_process_exec sched/sched_process_exit; do
  echo 1 >"$trace/events/$event/enable"
done
for _ in 1 2 3; do "$bin" --user --format tap run quick-check >/dev/null; done
echo >"$trace/trace"
echo 1 >"$trace/tracing_on"
for _ in $(seq 20); do "$bin" --user --format tap run quick-check >/dev/null; sleep 0.02; done
echo 0 >"$trace/tracing_on"
cp "$trace/trace" "$state/trace.log"
for event in opsbook sched/sched_switch sched/sched_process_exec sched/sched_process_exit; do
  echo 0 >"$trace/events/$event/enable"
done
echo 0 >"$trace/events/sched/sched_switch/filter"
echo >"$trace/uprobe_events"
echo "$was_on" >"$trace/tracing_on"
python3 "$REPO/bench/timeline.py" "$state/trace.log" >"$state/timeline.txt"
