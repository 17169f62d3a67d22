"""One value per object (an engine, a server's services) in this process: made on first ask,
under a lock so two threads never make two, and dropped with its object (held weakly), so a
disposed engine's change feed or kept vectors go with it."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class OnePer(Generic[K, V]):
    def __init__(self, make: Callable[[K], V]) -> None:
        self._make = make
        self._values: weakref.WeakKeyDictionary[K, V] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def __call__(self, key: K) -> V:
        with self._lock:
            value = self._values.get(key)
            if value is None:
                value = self._values[key] = self._make(key)
            return value
