"""Config: one point of a tuning space, a frozen and hashable knob -> value map."""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Iterator


class Config(Mapping[str, Any]):
    """Immutable mapping of knob names to JSON-able scalar values.

    Two configs with the same items are equal and hash alike whatever the
    order they were given in; `key` is a canonical JSON text for storage.
    """

    __slots__ = ("_items", "_hash", "_map")

    def __init__(self, items: Mapping[str, Any] | None = None, **kw: Any) -> None:
        d = dict(items or {}, **kw)
        for k, v in d.items():
            if not isinstance(k, str):
                raise TypeError(f"config knob names must be str, got {k!r}")
            if not isinstance(v, (str, int, float, bool)) and v is not None:
                raise TypeError(f"config value for {k!r} must be a JSON scalar, got {type(v).__name__}")
        self._items = tuple(sorted(d.items()))
        self._hash = hash(self._items)
        self._map = dict(self._items)   # lookups: restrictions read knobs millions of times

    @classmethod
    def from_sorted_items(cls, items: tuple[tuple[str, Any], ...]) -> "Config":
        """A Config from (name, value) pairs already sorted by name and of valid
        types (a Space's enumeration builds hundreds of thousands)."""
        c = cls.__new__(cls)
        c._items = items
        c._hash = hash(items)
        c._map = dict(items)
        return c

    def __getitem__(self, k: str) -> Any:
        return self._map[k]

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Config):
            return self._items == other._items
        if isinstance(other, Mapping):
            return self._items == tuple(sorted(other.items()))
        return NotImplemented

    def __repr__(self) -> str:
        return "Config(" + ", ".join(f"{k}={v!r}" for k, v in self._items) + ")"

    def __reduce__(self) -> tuple[type["Config"], tuple[dict[str, Any]]]:
        # rebuilt from its items when unpickled: the cached hash of text values
        # differs between processes (hash randomisation), so it must not travel
        return (Config, (dict(self._items),))

    def replace(self, **changes: Any) -> "Config":
        d = dict(self._items)
        d.update(changes)
        return Config(d)

    def to_dict(self) -> dict[str, Any]:
        return dict(self._items)

    def text(self) -> str:
        """'knob=value ...' in knob-name order: how tables and messages write a config
        (shadertune.backends.config_text prints only the knobs that act on it)."""
        return " ".join(f"{k}={v}" for k, v in self._items)

    @property
    def key(self) -> str:
        return json.dumps(dict(self._items), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> "Config":
        try:
            d = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"config is not valid JSON: {e}") from None
        if not isinstance(d, dict):
            raise ValueError(f"config JSON must be an object, got {type(d).__name__}")
        return cls(d)
