"""Per-process memo of heavy, read-only objects (datasets, indexes) that many env instances share.

Envs made with the same data (by ``gym.make``, ``branch`` or an ``EnvPool`` with the thread or
sync backend) reuse one catalogue, corpus and index instead of loading them again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

_OBJECTS: dict[Any, Any] = {}
_LOCK = threading.RLock()


def shared(key, build: Callable[[], Any]) -> Any:
    """``build()`` once per ``key`` in this process; later calls return the same object."""
    with _LOCK:
        if key not in _OBJECTS:
            _OBJECTS[key] = build()
        return _OBJECTS[key]
