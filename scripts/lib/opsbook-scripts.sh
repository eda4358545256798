# shellcheck shell=bash
# opsbook-scripts.sh: the body manage-svc.sh and svc-exec.sh share, sourced by both. Shipped
# inside opsbook with them (`opsbook scripts --install DIR` writes it to DIR/lib/).
#
# The script sourcing it sets `me` (its name), `actions` (what it does), `example` (one of
# them, for messages) and `environment_action` (the action taking an inventory group instead
# of HOST:ROLE, or empty), and defines `usage_actions` and `usage_plan` (its part of the usage),
# `own_option FLAG` (true when it took FLAG), `check_options` (its options, once the target
# is known) and `opsbook_args` (sets `args` and `changes` for $action of $role on $host, and
# may reword `what`); then it calls `main "$@"`. The roles and their names are opsbook's
# (`opsbook scripts --role NAME`, `--roles`): none is written here.
# shellcheck disable=SC2154 # what the sourcing script sets, as said above

# Where the sourcing script is: an opsbook beside it comes first.
scripts_dir=$(dirname "${BASH_SOURCE[1]}")

usage() {
  usage_actions
  echo
  echo "Roles: $(roles_listed)."
  echo
  usage_plan
  cat <<'EOF'
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

find_opsbook() {
  if [ -n "${OPSBOOK:-}" ]; then
    echo "$OPSBOOK"
  elif [ -x "$scripts_dir/opsbook" ]; then
    echo "$scripts_dir/opsbook"
  elif command -v opsbook >/dev/null 2>&1; then
    command -v opsbook
  else
    die "opsbook not found: set OPSBOOK=/path/to/opsbook, put it beside this script, or in PATH"
  fi
}

# The roles as opsbook names them, for the usage (without an opsbook, where to read them).
roles_listed() {
  local found
  if found=$(find_opsbook 2>/dev/null) && "$found" scripts --roles 2>/dev/null; then
    return
  fi
  echo "as \`opsbook scripts --roles\` lists them (no opsbook found)"
}

# opsbook's name for a role as operators write it (its name or alias, in any case).
role_of() {
  local said
  said=$("$opsbook" scripts --role "$1" 2>&1) || die "${said#error: }" usage
  echo "$said"
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

# The host and role of the HOST:ROLE an action is about.
split_service() {
  [[ $service == *:* ]] || die "\`$service\` is not HOST:ROLE (e.g. \`monitor3:log-shipper\`)" usage
  host=${service%:*} role=${service##*:}
}

# Whether the action takes an inventory group (`prepare ENVIRONMENT`).
on_environment() {
  [ -n "$environment_action" ] && [ "$action" = "$environment_action" ]
}

# Keeps what the run left in the state directory, and says where.
keep() {
  local dir
  dir="$(state_dir)/runs/$(date -u +%Y%m%dT%H%M%SZ)-$action-$host-$role"
  mkdir -p "$(dirname "$dir")"
  cp -r "$work" "$dir"
  local files=("$work"/*)
  echo "$me: $what failed (exit $1): kept ${files[*]##*/} in $dir" >&2
}

# Reads the command line into `yes`, `host`, `positional` and `passthrough`.
parse() {
  yes=0 rollout=0 host="" positional=() passthrough=()
  while [ $# -gt 0 ]; do
    case $1 in
      -y | --yes) yes=1 ;;
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
      -*) own_option "$1" || passthrough+=("$1") ;;
      *) positional+=("$1") ;;
    esac
    shift
  done
}

# The action, and what it is about: `host` and `role`, or the environment.
target() {
  if [ -n "$host" ]; then
    # The Ansible-era order: -h HOST ROLE ACTION.
    [ ${#positional[@]} -eq 2 ] || die "with \`-h $host\`, give ROLE ACTION (e.g. \`$me -h $host alloy $example\`)" usage
    role=${positional[0]} action=${positional[1]}
  else
    [ ${#positional[@]} -eq 2 ] ||
      die "give ACTION HOST:ROLE${environment_action:+ or $environment_action ENVIRONMENT} (e.g. \`$me $example monitor3:alloy\`)" usage
    action=${positional[0]} service=${positional[1]}
    # When every action takes HOST:ROLE, its form is checked before the action.
    [ -n "$environment_action" ] || split_service
  fi
  local a known=0
  for a in "${actions[@]}"; do [ "$a" != "$action" ] || known=1; done
  [ "$known" = 1 ] || die "unknown action \`$action\`$(did_you_mean "$action" "${actions[@]}") (actions: ${actions[*]})" usage
  if on_environment; then
    [ -z "$host" ] || die "\`$action\` takes an ENVIRONMENT (an inventory group), not \`-h HOST\`" usage
    # The environment stands where a host stands: in the question and the kept run's name.
    host=$service role=hosts
  elif [ -z "$host" ] && [ -n "$environment_action" ]; then
    split_service
  fi
}

# Shows the plan of a change and asks before it (`--yes`: without asking); runs it; keeps
# what a failed run said.
run() {
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  printf '%q ' "$opsbook" "${args[@]}" >"$work/command"
  echo >>"$work/command"

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
}

# A rollout (--serial, --canary) acts on every host of HOST (a host, a group, `all`) that
# plays ROLE, batch by batch; the plan (its dry run) shows the batches.
rollout_args() {
  [ "$rollout" = 1 ] || return 0
  local purged=("${args[@]:4}")
  case $action in
    deploy | remove | configure) args=(run "$action" --hosts "$host:&$role" --set "service=$role" "${purged[@]}") ;;
    restart) args=(run restart --hosts "$host:&$role" --set "component=$role") ;;
    *) die "\`$action\` has no rollout (--serial, --canary): deploy, remove, configure and restart have" usage ;;
  esac
}

main() {
  parse "$@"
  target
  check_options
  opsbook=$(find_opsbook)
  on_environment || role=$(role_of "$role")
  what="$action of $role on $host"
  opsbook_args
  rollout_args
  args+=("${passthrough[@]}")
  run
}
