"""Where a webhook may be sent: https to public addresses, checked at registration and
again before every attempt (a name can be re-pointed after registration).

`WEBHOOK_ALLOW_PRIVATE_URLS` (an operator setting, and the tests') also allows http and
loopback, link-local and private addresses, for receivers inside one's own network.
"""

import ipaddress
import socket
from urllib.parse import urlsplit

from django.conf import settings
from django.utils.translation import gettext as _


def url_refusal(url: str) -> str | None:
    """Why `url` may not receive webhooks, or None when it may."""
    allow_private = settings.ANCHORGPU["WEBHOOK_ALLOW_PRIVATE_URLS"]
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return _("This is not a valid URL.")
    if parts.scheme not in ("https", "http") or not parts.hostname:
        return _("Use an https:// URL with a host name.")
    if parts.scheme != "https" and not allow_private:
        return _("Use https: webhooks carry your allocations' details.")
    if parts.username or parts.password:
        return _("Put no user name or password in the URL; the signature authenticates us.")
    try:
        addresses = {
            str(info[4][0])
            for info in socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)
        }
    except (OSError, UnicodeError):
        return _("The host name %(host)s does not resolve.") % {"host": parts.hostname}
    if allow_private:
        return None
    for address in sorted(addresses):
        ip = ipaddress.ip_address(address.split("%")[0])
        if not ip.is_global or ip.is_multicast:
            return _(
                "%(host)s resolves to %(ip)s, a loopback, link-local, private or reserved "
                "address: webhooks go to public addresses only."
            ) % {"host": parts.hostname, "ip": ip}
    return None
