"""localstripe (PyPI) on loopback only: the embedded payment processor of `make run` and
`make test` (its own `python -m localstripe` listens on every interface). Started by
anchorgpu/launcher.py; no Django here.

    python -m payments.localstripe_server --port 8420
"""

import argparse

from aiohttp import web
from localstripe.server import app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=8420)
    args = parser.parse_args()
    web.run_app(app, host="127.0.0.1", port=args.port, print=None, access_log=None)


if __name__ == "__main__":
    main()
