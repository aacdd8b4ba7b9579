#!/usr/bin/env bash
# Runner container entrypoint: mounts knowledge/ before the agent starts and
# takes it down after the agent stops.
#
#   1. starts `knowledgefs mount` in the background and waits until it prints
#      `mounted …` (the tree is built), failing clearly if the daemon exits or
#      the timeout passes first;
#   2. runs the container's command as a child (not exec: something has to
#      unmount afterwards), forwarding SIGTERM/SIGINT/SIGHUP/SIGQUIT/SIGUSR1/2;
#   3. when the command ends, stops the daemon (it unmounts on SIGTERM), falls
#      back to `fusermount -uz` if the mount is still there, and exits with the
#      command's exit code.
#
# The runner token reaches the daemon only: KNOWLEDGEFS_TOKEN is removed from
# the environment of the container's command, and the token never appears in
# any process's arguments.
#
# Environment:
#   KNOWLEDGEFS_SERVER         control plane URL (required)
#   KNOWLEDGEFS_TOKEN_FILE     file holding the runner token, or
#   KNOWLEDGEFS_TOKEN          the runner token itself
#   KNOWLEDGEFS_MOUNTPOINT     default /workspace/knowledge
#   KNOWLEDGEFS_SOCKET         control socket, default /run/knowledgefs/control.sock;
#                              exported to the command so `knowledgefs read` finds it
#   KNOWLEDGEFS_MOUNT_ARGS     extra `knowledgefs mount` flags, split on spaces
#   KNOWLEDGEFS_READY_TIMEOUT  seconds to wait for the mount, default 60
#   KNOWLEDGEFS_RUN_AS         run the command as this user (the daemon stays
#                              root); adds --allow-other and --group <the user's
#                              primary group> (only that group may read the mount)
#                              unless --group is given, and hands the socket over
#   KNOWLEDGEFS_BIN            the knowledgefs executable, default `knowledgefs`
set -euo pipefail

say() { printf 'runner-entrypoint: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

server=${KNOWLEDGEFS_SERVER:-}
mountpoint_dir=${KNOWLEDGEFS_MOUNTPOINT:-/workspace/knowledge}
socket=${KNOWLEDGEFS_SOCKET:-/run/knowledgefs/control.sock}
timeout_s=${KNOWLEDGEFS_READY_TIMEOUT:-60}
run_as=${KNOWLEDGEFS_RUN_AS:-}
bin=${KNOWLEDGEFS_BIN:-knowledgefs}

[ -n "$server" ] || die "KNOWLEDGEFS_SERVER is not set (the control plane URL, e.g. http://control-plane:7420)"
if [ -n "${KNOWLEDGEFS_TOKEN_FILE:-}" ]; then
  [ -r "$KNOWLEDGEFS_TOKEN_FILE" ] || die "KNOWLEDGEFS_TOKEN_FILE=$KNOWLEDGEFS_TOKEN_FILE is not a readable file"
elif [ -z "${KNOWLEDGEFS_TOKEN:-}" ]; then
  die "no runner token: set KNOWLEDGEFS_TOKEN_FILE (preferred) or KNOWLEDGEFS_TOKEN"
fi
case $timeout_s in ''|*[!0-9]*) die "KNOWLEDGEFS_READY_TIMEOUT must be a whole number of seconds, got '$timeout_s'" ;; esac
command -v "$bin" >/dev/null 2>&1 || die "knowledgefs executable not found: $bin (set KNOWLEDGEFS_BIN)"
if [ -n "$run_as" ]; then
  id -u "$run_as" >/dev/null 2>&1 || die "KNOWLEDGEFS_RUN_AS=$run_as: no such user"
  [ "$(id -u)" = 0 ] || die "KNOWLEDGEFS_RUN_AS needs the entrypoint to start as root"
fi

# Extra flags: split on whitespace, no globbing.
set -f
# shellcheck disable=SC2206
extra=(${KNOWLEDGEFS_MOUNT_ARGS:-})
set +f
if [ -n "$run_as" ]; then
  case " ${extra[*]-} " in *" --allow-other "*) ;; *) extra+=(--allow-other) ;; esac
  # Not every user of the container: only the agent's group may read knowledge/.
  case " ${extra[*]-} " in *" --group "*) ;; *) extra+=(--group "$(id -g "$run_as")") ;; esac
fi

mkdir -p "$mountpoint_dir" || die "cannot create mount point $mountpoint_dir"
socket_dir=$(dirname "$socket")
mkdir -p "$socket_dir"
[ -z "$run_as" ] || chmod 0711 "$socket_dir"   # traversable, not listable

state_dir=$(mktemp -d "${TMPDIR:-/tmp}/knowledgefs-entrypoint.XXXXXX")
daemon_out=$state_dir/mount.out

token_args=()
[ -z "${KNOWLEDGEFS_TOKEN_FILE:-}" ] || token_args=(--token-file "$KNOWLEDGEFS_TOKEN_FILE")

# The daemon's stdout goes to a file we watch for the ready line; its stderr
# (progress, warnings, errors) goes straight to the container's stderr. It
# runs in its own session so a Ctrl-C meant for the command doesn't unmount
# knowledge/ under it.
setsid "$bin" mount "$mountpoint_dir" --server "$server" --socket "$socket" \
  ${token_args[@]+"${token_args[@]}"} ${extra[@]+"${extra[@]}"} >"$daemon_out" &
daemon=$!
unset KNOWLEDGEFS_TOKEN

daemon_rc=
stop_daemon() {
  if kill -0 "$daemon" 2>/dev/null; then
    kill -TERM "$daemon" 2>/dev/null || true
    for _ in $(seq 1 100); do
      kill -0 "$daemon" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$daemon" 2>/dev/null; then
      say "mount daemon did not stop within 10s; killing it"
      kill -KILL "$daemon" 2>/dev/null || true
    fi
  fi
  wait "$daemon" 2>/dev/null || true
  if mountpoint -q "$mountpoint_dir" 2>/dev/null || ! stat "$mountpoint_dir" >/dev/null 2>&1; then
    fusermount -uz "$mountpoint_dir" 2>/dev/null || umount -l "$mountpoint_dir" 2>/dev/null || true
  fi
  rm -rf "$state_dir"
}

# Signals that arrive before the command starts stop the daemon and exit.
trap 'stop_daemon; exit 143' TERM
trap 'stop_daemon; exit 130' INT
trap 'stop_daemon; exit 129' HUP

# Wait for `mounted …`; fail fast if the daemon exits first.
deadline=$((SECONDS + timeout_s))
until grep -q '^mounted ' "$daemon_out" 2>/dev/null; do
  if ! kill -0 "$daemon" 2>/dev/null; then
    set +e; wait "$daemon"; daemon_rc=$?; set -e
    cat "$daemon_out" >&2 || true
    rm -rf "$state_dir"
    die "knowledgefs mount exited with code $daemon_rc before the mount was ready (server $server, mount point $mountpoint_dir)"
  fi
  if [ "$SECONDS" -ge "$deadline" ]; then
    say "knowledge/ not ready after ${timeout_s}s (server $server); giving up"
    stop_daemon
    exit 1
  fi
  sleep 0.1
done
say "$(grep -m1 '^mounted ' "$daemon_out")"

if [ -n "$run_as" ]; then
  chown "$run_as" "$socket" || die "cannot hand the control socket $socket to $run_as"
fi
export KNOWLEDGEFS_SOCKET=$socket

if [ "$#" -eq 0 ]; then
  # No command: keep the mount up until the container is stopped.
  trap 'stop_daemon; exit 0' TERM INT HUP
  say "no command given; keeping $mountpoint_dir mounted until stopped"
  while kill -0 "$daemon" 2>/dev/null; do sleep 1 & wait $! || true; done
  set +e; wait "$daemon"; daemon_rc=$?; set -e
  rm -rf "$state_dir"
  exit "$daemon_rc"
fi

# Run the command as a child. Background jobs in a script start with SIGINT
# and SIGQUIT ignored; `env --default-signal` gives them back their defaults
# so forwarded signals work. `<&0` keeps stdin (a background job would
# otherwise read /dev/null).
if [ -n "$run_as" ]; then
  home=$(getent passwd "$run_as" | cut -d: -f6)
  HOME=${home:-/} USER=$run_as env --default-signal=SIGINT,SIGQUIT \
    setpriv --reuid="$run_as" --regid="$(id -g "$run_as")" --init-groups -- "$@" <&0 &
else
  env --default-signal=SIGINT,SIGQUIT "$@" <&0 &
fi
child=$!

forward() { kill -s "$1" "$child" 2>/dev/null || true; }
for sig in TERM INT HUP QUIT USR1 USR2; do
  # shellcheck disable=SC2064
  trap "forward $sig" "$sig"
done

# `wait` returns early when a trapped signal arrives; keep waiting until the
# child has really exited, then take its status.
while :; do
  set +e; wait "$child"; rc=$?; set -e
  if kill -0 "$child" 2>/dev/null; then continue; fi
  if [ "$rc" -gt 128 ]; then
    set +e; wait "$child" 2>/dev/null; again=$?; set -e
    [ "$again" -eq 127 ] || rc=$again
  fi
  break
done

trap '' TERM INT HUP QUIT USR1 USR2
kill -0 "$daemon" 2>/dev/null || say "warning: the mount daemon had already exited"
stop_daemon
exit "$rc"
