"""The store's errors, apart from the store so that every db module can raise them."""
from ..errors import StoreError


class StoreDamaged(StoreError):
    """SQLite's integrity check found damage: nothing is written to the store, and
    readers that would answer from it refuse (db/check.py)."""


class StoreBusy(StoreError):
    """Another connection holds a lock on the store for longer than the wait allowed:
    the store may be healthy; try again when it is free."""
