#!/usr/bin/env bash
# svc-exec.sh: verify, restart or reconfigure one service (HOST:ROLE) of the monitoring stack,
# as `opsbook run` calls. Shipped inside opsbook: `opsbook scripts --install DIR` writes it.
# Thin on purpose: the procedures are opsbook's runbooks; this maps the operators' words onto
# them, shows the plan and asks before a change, and keeps what a failed run said. What it
# shares with manage-svc.sh is in lib/opsbook-scripts.sh.
set -euo pipefail

me=svc-exec.sh
actions=(verify restart configure)
example=verify
environment_action=""

usage_actions() {
  cat <<'EOF'
Usage: svc-exec.sh [-y] ACTION HOST:ROLE [OPSBOOK OPTIONS...]
       svc-exec.sh [-y] -h HOST ROLE ACTION [OPSBOOK OPTIONS...]

Actions:
  verify     check the service; changes nothing    opsbook run verify-ROLE --host HOST
  restart    restart it                             opsbook run restart --host HOST --set component=ROLE
  configure  render, check and apply its config     opsbook run configure --set service=HOST:ROLE
EOF
}

usage_plan() {
  cat <<'EOF'
Before restart and configure the plan is shown (the same run with --dry-run), then
"Apply these changes to HOST? [y/N]" is asked on the terminal.
EOF
}

# No options of its own: the others go to opsbook.
own_option() {
  false
}

check_options() {
  :
}

opsbook_args() {
  case $action in
    verify) args=(run "verify-$role" --host "$host") changes=0 ;;
    restart) args=(run restart --host "$host" --set "component=$role") changes=1 ;;
    configure) args=(run configure --set "service=$host:$role") changes=1 ;;
  esac
}

lib="$(dirname "${BASH_SOURCE[0]}")/lib/opsbook-scripts.sh"
[ -r "$lib" ] || { echo "$me: $lib is missing: install the scripts with \`opsbook scripts --install DIR\`" >&2; exit 2; }
# shellcheck source-path=SCRIPTDIR source=lib/opsbook-scripts.sh
source "$lib"
main "$@"
