#!/bin/sh
# AnchorGPU's PAM session hook (docs/agent.md): puts a tenant's session into its
# allocation's control groups before any of the tenant's code runs.
#
#   session required pam_exec.so quiet /opt/anchorgpu-agent/nodeagent/pam_session.sh /run/anchorgpu/sessions
#
# pam_exec runs it as root from sshd's privileged process for the session, its parent:
# everything the session starts (~/.ssh/rc, the shell, scp, sftp) descends from that
# process, and so starts in the groups. The agent writes, per tenant granted now, the
# cgroup.procs files of its groups (or "systemd": pam_systemd placed the session in its
# slice). A tenant with no such file has no access now: the session is refused.
[ "$PAM_TYPE" = open_session ] || exit 0
case "$PAM_USER" in "" | */* | .*) exit 1 ;; esac
groups="${1:-/run/anchorgpu/sessions}/$PAM_USER"
[ -f "$groups" ] || exit 1
while IFS= read -r procs; do
    case "$procs" in
        systemd) ;;
        */cgroup.procs) printf '%s\n' "$PPID" >"$procs" || exit 1 ;;
        *) exit 1 ;;
    esac
done <"$groups"
exit 0
