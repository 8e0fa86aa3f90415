#!/bin/sh
# pam_namespace's init script for a tenant's private /tmp (docs/agent.md). It runs as root
# inside the session's new mount namespace, so the /proc mounted here is the session's
# alone: it shows the tenant's own processes only (hidepid=invisible), and the host's /proc
# is left as it was. Arguments: the polyinstantiated folder, its instance, whether the
# instance is new (1 or 0), the user.
[ "$1" = /tmp ] || exit 0
exec mount -t proc -o nosuid,nodev,noexec,hidepid=invisible proc /proc
