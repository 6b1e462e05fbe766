"""Where the store lives, and which files are the store: shadertune.core.store_location (a
core module, so that the one output writer can protect the stores it names), as the
store package names it."""
from ..core.store_location import (NoStoreLocation, SIDE_FILES, STORE_NAME, default_path, home,
                              known_store_files, names_default_place, store_files, store_path,
                              user_path)

__all__ = ["NoStoreLocation", "SIDE_FILES", "STORE_NAME", "default_path", "home",
           "known_store_files", "names_default_place", "store_files", "store_path", "user_path"]
