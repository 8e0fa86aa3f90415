"""Who the product is and where people write to, from the settings (SITE_NAME,
SUPPORT_EMAIL): pages and mails name them rather than a host or "contact us"."""

from django import template
from django.conf import settings
from django.utils.html import format_html

register = template.Library()


@register.simple_tag
def site_name() -> str:
    name: str = settings.SITE_NAME
    return name


@register.simple_tag
def support_email() -> str:
    email: str = settings.SUPPORT_EMAIL
    return email


@register.simple_tag
def support_link() -> str:
    """The support address as a mailto link."""
    return format_html('<a href="mailto:{0}">{0}</a>', settings.SUPPORT_EMAIL)
