"""The store's error, apart from the store so that every db module can raise it."""
from ..errors import ShadertuneError


class StoreError(ShadertuneError):
    """The store cannot be used: wrong schema version, not a store, unreadable, unwritable,
    damaged, or nowhere to put it."""
