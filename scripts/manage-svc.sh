#!/usr/bin/env bash
# manage-svc.sh: deploy or remove one service (HOST:ROLE) of the monitoring stack, or prepare
# the hosts of an environment, as `opsbook run` calls. Shipped inside opsbook: `opsbook scripts --install DIR` writes it.
# Thin on purpose: the procedures are opsbook's runbooks; this maps the operators' words onto
# them, shows the plan and asks before a change, and keeps what a failed run said.
set -euo pipefail

me=manage-svc.sh
actions=(deploy remove prepare)

usage() {
  cat <<'EOF'
Usage: manage-svc.sh [-y] deploy|remove HOST:ROLE [--purge] [OPSBOOK OPTIONS...]
       manage-svc.sh [-y] prepare ENVIRONMENT [OPSBOOK OPTIONS...]
       manage-svc.sh [-y] -h HOST ROLE deploy|remove [OPSBOOK OPTIONS...]

Actions:
  deploy   put the service on the host and start it   opsbook run deploy --set service=HOST:ROLE
  remove   stop it and take it off (data kept;        opsbook run remove --set service=HOST:ROLE
           --purge removes the data too)                 [--set purge=true]
  prepare  data directories, accounts and firewall    opsbook run prepare --set environment=GROUP
           on every host of an inventory group

Roles: metrics-db (influxdb), log-store (loki), metrics-agent (telegraf), log-shipper (alloy).

Rollouts: with --serial N|P% (and --canary, --max-fail N|P%, --no-rollback) HOST may be a
group or `all`: every host of it playing ROLE is changed batch by batch, a host whose checks
fail is rolled back, and the plan shows the batches (opsbook run deploy --hosts HOST:&ROLE
--set service=ROLE --serial N).

Before any change the plan is shown (the same run with --dry-run), then "Apply these
changes to HOST? [y/N]" is asked on the terminal.
  -y, --yes   apply without asking (required when there is no terminal)
  --help      this text

Other options go to opsbook as they are: --inventory FILE, --config FILE, --runbooks DIR,
--sandbox, --fleet N, --fault SPEC, --format FORMAT, --user, -v; everything after `--` too.
opsbook is $OPSBOOK, else the opsbook beside this script, else the one in PATH.

A failed run keeps its command, plan and report (report.txt, and report.json as with
--format json) in $XDG_STATE_HOME/opsbook/runs/DATE-ACTION-HOST-ROLE/ (without
XDG_STATE_HOME: /var/lib/opsbook/runs/ for root, ~/.local/state/opsbook/runs/ for others)
and says where. Exit status: opsbook's (0 passed, 1 a check failed), 2 usage or refusal.
EOF
}

die() {
  echo "$me: $1" >&2
  [ "${2:-}" = usage ] && echo "  (see \`$me --help\`)" >&2
  exit 2
}

# The edit distance of two words (Levenshtein), for "did you mean".
distance() {
  local a=$1 b=$2 i j cost del ins sub
  local -a prev cur
  for ((j = 0; j <= ${#b}; j++)); do prev[j]=$j; done
  for ((i = 1; i <= ${#a}; i++)); do
    cur=("$i")
    for ((j = 1; j <= ${#b}; j++)); do
      cost=1
      [ "${a:i-1:1}" = "${b:j-1:1}" ] && cost=0
      del=$((prev[j] + 1)) ins=$((cur[j - 1] + 1)) sub=$((prev[j - 1] + cost))
      cur[j]=$((del < ins ? (del < sub ? del : sub) : (ins < sub ? ins : sub)))
    done
    prev=("${cur[@]}")
  done
  echo "${prev[${#b}]}"
}

# "; did you mean `X`?" for the closest candidate at most 3 edits away, else nothing.
did_you_mean() {
  local word=$1 best="" best_d=4 c d
  shift
  for c in "$@"; do
    d=$(distance "$word" "$c")
    if [ "$d" -lt "$best_d" ]; then best=$c best_d=$d; fi
  done
  if [ -n "$best" ]; then printf "; did you mean \`%s\`?" "$best"; fi
}

# opsbook's name for a role as operators write it.
role_of() {
  case "${1,,}" in
    metrics-db | metrics_db | influxdb) echo metrics-db ;;
    log-store | log_store | loki) echo log-store ;;
    metrics-agent | metrics_agent | telegraf) echo metrics-agent ;;
    log-shipper | log_shipper | alloy) echo log-shipper ;;
    *)
      local hint
      hint=$(did_you_mean "${1,,}" metrics-db influxdb log-store loki metrics-agent telegraf log-shipper alloy)
      die "unknown role \`$1\`$hint (roles: metrics-db (influxdb), log-store (loki), metrics-agent (telegraf), log-shipper (alloy))" usage
      ;;
  esac
}

find_opsbook() {
  if [ -n "${OPSBOOK:-}" ]; then
    echo "$OPSBOOK"
  elif [ -x "$(dirname "${BASH_SOURCE[0]}")/opsbook" ]; then
    echo "$(dirname "${BASH_SOURCE[0]}")/opsbook"
  elif command -v opsbook >/dev/null 2>&1; then
    command -v opsbook
  else
    die "opsbook not found: set OPSBOOK=/path/to/opsbook, put it beside this script, or in PATH"
  fi
}

state_dir() {
  if [ -n "${XDG_STATE_HOME:-}" ]; then
    echo "$XDG_STATE_HOME/opsbook"
  elif [ "$(id -u)" = 0 ]; then
    echo /var/lib/opsbook
  else
    echo "${HOME:-.}/.local/state/opsbook"
  fi
}

yes=0 purge=0 rollout=0 host="" positional=() passthrough=()
while [ $# -gt 0 ]; do
  case $1 in
    -y | --yes) yes=1 ;;
    --purge) purge=1 ;;
    --help | -\?) usage; exit 0 ;;
    -h)
      [ $# -ge 2 ] || die "\`-h\` needs a HOST" usage
      host=$2
      shift
      ;;
    --) shift; passthrough+=("$@"); break ;;
    # opsbook's options that take a value: the value goes with them.
    --inventory | --config | --runbooks | --fleet | --forks | --format | --fault | --set | --serial | --max-fail)
      [ $# -ge 2 ] || die "\`$1\` needs a value" usage
      [ "$1" != --serial ] || rollout=1
      passthrough+=("$1" "$2")
      shift
      ;;
    --canary)
      rollout=1
      passthrough+=("$1")
      ;;
    -*) passthrough+=("$1") ;;
    *) positional+=("$1") ;;
  esac
  shift
done

if [ -n "$host" ]; then
  # The Ansible-era order: -h HOST ROLE ACTION.
  [ ${#positional[@]} -eq 2 ] || die "with \`-h $host\`, give ROLE ACTION (e.g. \`$me -h $host alloy deploy\`)" usage
  role=${positional[0]} action=${positional[1]}
else
  [ ${#positional[@]} -eq 2 ] || die "give ACTION HOST:ROLE or prepare ENVIRONMENT (e.g. \`$me deploy monitor3:alloy\`)" usage
  action=${positional[0]} service=${positional[1]}
fi
case $action in
  deploy | remove | prepare) ;;
  *) die "unknown action \`$action\`$(did_you_mean "$action" "${actions[@]}") (actions: ${actions[*]})" usage ;;
esac
if [ "$action" = prepare ]; then
  [ -z "$host" ] || die "\`prepare\` takes an ENVIRONMENT (an inventory group), not \`-h HOST\`" usage
  # The environment stands where a host stands: in the question and the kept run's name.
  host=$service role=hosts
elif [ -z "$host" ]; then
  [[ $service == *:* ]] || die "\`$service\` is not HOST:ROLE (e.g. \`monitor3:log-shipper\`)" usage
  host=${service%:*} role=${service##*:}
fi
[ "$purge" = 0 ] || [ "$action" = remove ] || die "\`--purge\` goes with \`remove\` only" usage
[ "$action" = prepare ] || role=$(role_of "$role")
opsbook=$(find_opsbook)

case $action in
  deploy) args=(run deploy --set "service=$host:$role") ;;
  remove) args=(run remove --set "service=$host:$role") ;;
  prepare) args=(run prepare --set "environment=$host") ;;
esac
# A rollout acts on every host of HOST (a host, a group, `all`) that plays ROLE, batch by batch.
if [ "$rollout" = 1 ]; then
  [ "$action" != prepare ] || die "\`prepare\` has no rollout (--serial, --canary): it makes directories, accounts and firewall rules, which a rollback does not restore" usage
  args=(run "$action" --hosts "$host:&$role" --set "service=$role")
fi
[ "$purge" = 0 ] || args+=(--set purge=true)
changes=1
args+=("${passthrough[@]}")

what="$action of $role on $host"
[ "$action" != prepare ] || what="prepare of the hosts of $host"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '%q ' "$opsbook" "${args[@]}" >"$work/command"
echo >>"$work/command"

# Keeps what the run left in the state directory, and says where.
keep() {
  local dir
  dir="$(state_dir)/runs/$(date -u +%Y%m%dT%H%M%SZ)-$action-$host-$role"
  mkdir -p "$(dirname "$dir")"
  cp -r "$work" "$dir"
  local files=("$work"/*)
  echo "$me: $what failed (exit $1): kept ${files[*]##*/} in $dir" >&2
}

if [ "$changes" = 1 ]; then
  echo "plan: $what (the same run with --dry-run; nothing changes yet)"
  status=0
  "$opsbook" "${args[@]}" --dry-run 2>&1 | tee "$work/plan.txt" || status=${PIPESTATUS[0]}
  # A failed check in the plan is what the change may fix; a usage or script error is not.
  if [ "$status" -ge 2 ]; then
    keep "$status"
    exit "$status"
  fi
  if [ "$yes" != 1 ]; then
    if ! { exec 3<>/dev/tty; } 2>/dev/null; then
      die "not applied: there is no terminal to ask \"Apply these changes to $host?\"; run again with --yes to apply"
    fi
    printf 'Apply these changes to %s? [y/N] ' "$host" >&3
    answer=""
    read -r answer <&3 || true
    exec 3>&-
    case $answer in
      y | Y | yes | Yes | YES) ;;
      *) echo "$me: not applied (answered \"$answer\")" >&2; exit 1 ;;
    esac
  fi
fi

status=0
"$opsbook" "${args[@]}" --save-json "$work/report.json" 2>&1 | tee "$work/report.txt" || status=${PIPESTATUS[0]}
if [ "$status" -ne 0 ]; then
  keep "$status"
fi
exit "$status"
