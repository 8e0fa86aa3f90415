#!/bin/sh
# AnchorGPU's sshd ForceCommand for tenants (docs/agent.md): the allocation's GPU variable,
# by UUID, from the agent's side (never from the client or a key option; and only a
# convenience: the kernel holds the devices), then ~/.ssh/rc, which sshd skips under a
# forced command (its output goes to stderr, so scp and sftp stay clean), then what the
# tenant asked for: a command, scp, sftp or rsync (sshd hands a subsystem's command over),
# or a login shell. All of it runs in the allocation's groups: PAM put the session there.
#
#   ForceCommand /opt/anchorgpu-agent/nodeagent/session_shell.sh /etc/anchorgpu/env
variables="${1:-/etc/anchorgpu/env}/$(id -un)"
if [ -r "$variables" ]; then
    set -a
    . "$variables"
    set +a
fi
if [ -f "$HOME/.ssh/rc" ]; then
    /bin/sh "$HOME/.ssh/rc" </dev/null >&2
fi
if [ -n "${SSH_ORIGINAL_COMMAND:-}" ]; then
    exec "$SHELL" -c "$SSH_ORIGINAL_COMMAND"
fi
exec "$SHELL" -l
