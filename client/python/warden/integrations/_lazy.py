"""Adapters subclass their framework's classes, so they are built on first
access, importing the framework only then."""
from __future__ import annotations

from typing import Any, Callable, Dict


def lazy_attribute(name: str, build: Callable[[], Any]) -> Callable[[str], Any]:
    """A module-level __getattr__ (PEP 562) that builds `name` once, on first access."""
    built: Dict[str, Any] = {}

    def __getattr__(attribute: str) -> Any:
        if attribute != name:
            raise AttributeError("module has no attribute %r" % attribute)
        if name not in built:
            built[name] = build()
        return built[name]

    return __getattr__
