"""The node's own configuration for confined sessions, as text: sshd's, PAM's and
pam_namespace's. `python -m nodeagent config sshd|pam|namespace` prints each for a node
(docs/agent.md has the steps), and the tests write the same text with paths of their own,
so what is documented is what is tested.
"""

from pathlib import Path

from nodeagent.hosts import Layout

HERE = Path(__file__).resolve().parent


def sshd_config(layout: Layout, *, agent: Path = HERE) -> str:
    """For /etc/ssh/sshd_config.d/anchorgpu.conf: keys only from root's folder, PAM's
    session stack (the hook), and the wrapper for the tenants' sessions."""
    return f"""\
# AnchorGPU tenants (docs/agent.md). The first three are sshd's defaults on Debian and
# apply to every account; the rest to tenants only.
UsePAM yes
PermitUserEnvironment no
StrictModes yes
Match Group {layout.tenant_group}
    AuthorizedKeysFile {layout.keys}/%u
    PubkeyAuthentication yes
    PasswordAuthentication no
    KbdInteractiveAuthentication no
    ForceCommand {agent}/session_shell.sh {layout.env}
    AllowAgentForwarding no
    X11Forwarding no
    PermitTunnel no
"""


def pam_lines(layout: Layout, *, agent: Path = HERE) -> str:
    """For the end of sshd's PAM session stack (/etc/pam.d/sshd): for the tenant group's
    members only, the hook that puts the session into its groups, then its private
    folders and /proc."""
    return f"""\
# AnchorGPU tenants (docs/agent.md): confined before any of their code runs.
session [success=ok default=2] pam_succeed_if.so quiet user ingroup {layout.tenant_group}
session required pam_exec.so quiet {agent}/pam_session.sh {layout.sessions}
session required pam_namespace.so
"""


def namespace_conf(layout: Layout, *, agent: Path = HERE) -> str:
    """For /etc/security/namespace.d/anchorgpu.conf: a /tmp and /var/tmp of the tenant's
    own (kept until expiry, when the agent removes them), a /dev/shm of each session's own
    (a tmpfs, gone with the session), and the init script's private /proc."""
    return f"""\
# AnchorGPU tenants (docs/agent.md); pam_namespace runs only for them (the PAM gate).
/tmp      {layout.private}/tmp/      user:iscript={agent}/namespace_init.sh  root
/var/tmp  {layout.private}/var-tmp/  user:noinit                             root
/dev/shm  /dev/shm/                  tmpfs:noinit                            root
"""


TEXTS = {"sshd": sshd_config, "pam": pam_lines, "namespace": namespace_conf}
