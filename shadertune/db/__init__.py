"""The tuning store: every measured Result in SQLite (see store.py), its schema and
versions (schema.py), cached space sizes (spaces.py), export/import/merge
(exchange.py), where it lives (location.py), its health
(check.py) and its command line, `python -m shadertune.db` (cli.py)."""
from .schema import MIGRATIONS, SCHEMA_VERSION
from .spaces import space_sizes
from .location import default_path
from .store import Store, StoreError

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "Store", "StoreError", "default_path", "space_sizes"]
