#!/usr/bin/env sh
# Creates docker/secrets/admin-token for docker/compose.yaml unless it exists.
# The directory is 0700 (private on the host); the file itself is 0644
# because compose bind-mounts it with its host mode and the control plane
# reads it as the image's unprivileged `node` user.
set -eu
dir=$(dirname "$0")/secrets
mkdir -p "$dir"
chmod 0700 "$dir"
if [ -s "$dir/admin-token" ]; then
  echo "make-secrets: $dir/admin-token already exists; keeping it" >&2
  exit 0
fi
umask 022
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$dir/admin-token"
echo "make-secrets: wrote $dir/admin-token" >&2
