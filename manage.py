#!/usr/bin/env python
import os
import sys


def main():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anchorgpu.settings")
    from django.core.management import execute_from_command_line

    if os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL"):
        execute_from_command_line(sys.argv)
        return
    # No servers given: the embedded ones, as `make run` uses them (joined while it runs).
    from anchorgpu.launcher import services

    with services(share="join") as env:
        os.environ.update(env)
        execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
