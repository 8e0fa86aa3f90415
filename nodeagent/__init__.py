"""AnchorGPU's reference node agent: it pulls its node's desired state from AnchorGPU and
makes the machine match it (tenant accounts, their authorized_keys and visible GPUs), then
reports what it did. Standard library only, so a node needs nothing but Python 3.11.

It imports nothing of the console's: it is the code that runs on the nodes (docs/agent.md).
"""

VERSION = "anchorgpu-agent/1.0"
# The tenants' logins start with this; the console names them (rentals.access.tenant_login).
TENANT_PREFIX = "agpu-"


class HostError(Exception):
    """What the host refused or failed to do, in words for the report."""
