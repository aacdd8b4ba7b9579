#!/usr/bin/env bash
# What a platform team does with the npm tarball, inside a container that has
# Node 24, libfuse3-3 and fuse3 and nothing else (no compiler, Python or
# libfuse 2): `npm i -g` it, then run the whole unprivileged shape with only
# the installed `knowledgefs`. Prints `name=value` lines (and begin/end
# blocks) that test/artifacts/artifacts.artifact.ts checks; a step that fails
# prints what it got and the run goes on, so one run shows every result.
#
# Mounted: /pkg/knowledgefs.tgz (the tarball), /kb (examples/knowledge-base),
# /ca.pem (optional: a CA bundle for npm behind a TLS-intercepting proxy).
set -u
cd /

say() { printf '%s=%s\n' "$1" "$2"; }
block() { echo "$1-begin"; cat "$2"; echo "$1-end"; }
as_agent() { setpriv --reuid=agent --regid=agent --init-groups -- "$@"; }

for tool in gcc cc make python3 python; do command -v "$tool" >/dev/null 2>&1 && say has "$tool"; done
ldconfig -p | grep -q 'libfuse\.so\.2' && say has libfuse2
say has-done yes

[ -s /ca.pem ] && export NODE_EXTRA_CA_CERTS=/ca.pem
start=$(date +%s%N)
npm i -g --no-audit --no-fund --no-update-notifier /pkg/knowledgefs.tgz >/tmp/install.out 2>&1
say install-exit $?
say install-ms $(( ($(date +%s%N) - start) / 1000000 ))
block install /tmp/install.out
unset NODE_EXTRA_CA_CERTS
say bin "$(command -v knowledgefs)"
say version "$(knowledgefs --version 2>&1)"

# Users: the daemon's (kfs) and the agent's, each its own uid and group.
useradd --system --user-group --no-create-home --shell /usr/sbin/nologin kfs
useradd --create-home --user-group --shell /bin/bash agent
say uids "kfs=$(id -u kfs) agent=$(id -u agent)"

# The control plane, as the unprivileged `node` user.
cp -r /kb /data && chown -R node:node /data
install -d -o node -g node -m 0700 /var/lib/kfs
printf '%s' artifacts-test-admin-token-0123456789abcdef >/run/admin-token
chown node /run/admin-token && chmod 0400 /run/admin-token
setpriv --reuid=node --regid=node --init-groups -- knowledgefs serve --data /data --listen 127.0.0.1:7420 \
  --state /var/lib/kfs/state.json --audit-log /var/lib/kfs/audit.log --admin-token-file /run/admin-token >/tmp/serve.out 2>&1 &
serve_pid=$!
healthy=no
for _ in $(seq 100); do
  if node -e "fetch('http://127.0.0.1:7420/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"; then healthy=yes; break; fi
  sleep 0.1
done
say serve-healthy $healthy
server=http://127.0.0.1:7420
created=$(knowledgefs session create --server $server --admin-token-file /run/admin-token \
  --kind personal --creator alice --team payments --json 2>&1)
say session-exit $?
token=$(printf '%s' "$created" | node -e "process.stdout.write(JSON.parse(require('fs').readFileSync(0,'utf8')).token??'')" 2>/dev/null)
case $token in kfs_*) say session-token yes ;; *) say session-token "no: $created" ;; esac

install -d -m 0755 /run/knowledgefs
printf '%s' "$token" >/run/knowledgefs/token
chown kfs:kfs /run/knowledgefs/token && chmod 0400 /run/knowledgefs/token

knowledgefs doctor --server $server --token-file /run/knowledgefs/token >/tmp/doctor.out 2>&1
say doctor-exit $?
block doctor /tmp/doctor.out

# The privileged step: mount-helper (root) mounts and runs the daemon as kfs
# with no capabilities; only group agent may read; the helper makes the
# socket directory.
mkdir -p /workspace && chown agent:agent /workspace
sock=/run/knowledgefs/kfs/control.sock
knowledgefs mount-helper /workspace/knowledge --user kfs --group agent --socket $sock -- \
  knowledgefs mount /workspace/knowledge --fuse-fd 3 --group agent \
    --server $server --token-file /run/knowledgefs/token --socket $sock >/tmp/helper.out 2>&1 &
helper_pid=$!
mounted=no
for _ in $(seq 300); do
  grep -q '^mounted ' /tmp/helper.out && { mounted=yes; break; }
  kill -0 $helper_pid 2>/dev/null || break
  sleep 0.1
done
say mounted $mounted
daemon_pid=
for p in /proc/[0-9]*; do
  [ "$(sed 's/^.*) //' "$p/stat" 2>/dev/null | cut -d' ' -f2)" = "$helper_pid" ] && daemon_pid=${p#/proc/}
done
say daemon-user "$(stat -c %U /proc/$daemon_pid 2>/dev/null)"
say daemon-capeff "$(awk '/^CapEff/{print $2}' /proc/$daemon_pid/status 2>/dev/null)"
say daemon-capbnd "$(awk '/^CapBnd/{print $2}' /proc/$daemon_pid/status 2>/dev/null)"
say mount-options "$(awk '$2=="/workspace/knowledge"{print $4}' /proc/mounts)"
say socket-dir "$(stat -c '%U:%G %a' /run/knowledgefs/kfs 2>&1)"

# The agent, through the kernel and the read tool.
cd /workspace
say ls1 "$(as_agent ls knowledge | tr '\n' ' ')"
say cat-search "$(as_agent cat knowledge/team_search/DUTY.md 2>&1 >/dev/null)"
say cat-storage "$(as_agent cat knowledge/team_storage/DUTY.md 2>&1 >/dev/null)"
as_agent knowledgefs read knowledge/team_search/DUTY.md --socket $sock >/dev/null 2>/tmp/untrusted.err
say read-unnamed-exit $?
say read-unnamed-err "$(head -c 400 /tmp/untrusted.err)"
export KNOWLEDGEFS_SOCKET=$sock
r=$(as_agent knowledgefs read knowledge/team_search/DUTY.md --daemon-user kfs --json 2>&1)
say read-exit $?
printf 'read=%s\n' "$r"
as_agent knowledgefs read knowledge/team_storage/DUTY.md --daemon-user kfs >/dev/null 2>&1
say read-storage-exit $?
say ls2 "$(as_agent ls knowledge | tr '\n' ' ')"
say grep "$(as_agent grep -rl failover knowledge | sort | tr '\n' ' ')"
KNOWLEDGEFS_DAEMON_USER=kfs as_agent knowledgefs manifest >/tmp/manifest.out 2>&1
say manifest-exit $?
block manifest /tmp/manifest.out
as_agent cat knowledge/account/DUTY.md >/dev/null
say write-append "$(as_agent sh -c 'echo x >> knowledge/account/DUTY.md' 2>&1)"
say write-create "$(as_agent touch knowledge/account/new.md 2>&1)"
say write-opens "$(as_agent node -e "const fs=require('fs');for(const f of ['r+','w','a'])try{fs.closeSync(fs.openSync('knowledge/account/DUTY.md',f));console.log(f,'opened')}catch(e){console.log(f,e.code)}" | tr '\n' ' ')"
as_agent umount knowledge >/dev/null 2>&1; say agent-umount-exit $?
as_agent fusermount3 -u knowledge >/dev/null 2>&1; say agent-fusermount-exit $?
as_agent sh -c "kill -TERM $daemon_pid" >/dev/null 2>&1; say agent-signal-exit $?
as_agent cat "/proc/$daemon_pid/environ" >/dev/null 2>&1; say agent-environ-exit $?
as_agent cat /run/knowledgefs/token >/dev/null 2>&1; say agent-token-exit $?
say still-mounted "$(awk '$2=="/workspace/knowledge"' /proc/mounts | wc -l)"

# A revocation: alice leaves the search team on the control plane's side.
node -e "const f='/data/directory.json',fs=require('fs'),d=JSON.parse(fs.readFileSync(f));d.users.alice.teams=['payments'];fs.writeFileSync(f+'.new',JSON.stringify(d));fs.renameSync(f+'.new',f)"
revoked=no
for _ in $(seq 100); do
  if ! as_agent ls knowledge | grep -q team_search; then revoked=yes; break; fi
  sleep 0.1
done
say revoked $revoked
say cat-after-revoke "$(as_agent cat knowledge/team_search/DUTY.md 2>&1 >/dev/null)"

# Stop: the helper detaches, the daemon ends, nothing stays mounted.
kill -TERM $helper_pid
wait $helper_pid
say helper-exit $?
say mounts-after "$(awk '$2=="/workspace/knowledge"' /proc/mounts | wc -l)"
[ -n "$daemon_pid" ] && [ -e /proc/$daemon_pid ] && say daemon-after running || say daemon-after gone
block helper /tmp/helper.out
kill -TERM $serve_pid
wait $serve_pid
say serve-exit $?
say done yes
