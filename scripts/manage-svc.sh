#!/usr/bin/env bash
# manage-svc.sh: deploy or remove one service (HOST:ROLE) of the monitoring stack, or prepare
# the hosts of an environment, as `opsbook run` calls. Shipped inside opsbook: `opsbook scripts --install DIR` writes it.
# Thin on purpose: the procedures are opsbook's runbooks; this maps the operators' words onto
# them, shows the plan and asks before a change, and keeps what a failed run said. What it
# shares with svc-exec.sh is in lib/opsbook-scripts.sh.
set -euo pipefail

me=manage-svc.sh
actions=(deploy remove prepare)
example=deploy
environment_action=prepare

usage_actions() {
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
EOF
}

usage_plan() {
  cat <<'EOF'
Before any change the plan is shown (the same run with --dry-run), then "Apply these
changes to HOST? [y/N]" is asked on the terminal.
EOF
}

purge=0
own_option() {
  [ "$1" = --purge ] && purge=1
}

check_options() {
  [ "$purge" = 0 ] || [ "$action" = remove ] || die "\`--purge\` goes with \`remove\` only" usage
}

opsbook_args() {
  case $action in
    deploy) args=(run deploy --set "service=$host:$role") ;;
    remove) args=(run remove --set "service=$host:$role") ;;
    prepare) args=(run prepare --set "environment=$host") what="prepare of the hosts of $host" ;;
  esac
  [ "$purge" = 0 ] || args+=(--set purge=true)
  changes=1
}

lib="$(dirname "${BASH_SOURCE[0]}")/lib/opsbook-scripts.sh"
[ -r "$lib" ] || { echo "$me: $lib is missing: install the scripts with \`opsbook scripts --install DIR\`" >&2; exit 2; }
# shellcheck source-path=SCRIPTDIR source=lib/opsbook-scripts.sh
source "$lib"
main "$@"
