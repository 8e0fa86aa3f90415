"""Waiting, bounded, for what another thread or process does."""

import time
from collections.abc import Callable


def wait_for(condition: Callable[[], object], timeout: float = 30.0) -> bool:
    """The worker runs in another thread: wait (bounded) for its effect to be visible."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False
