"""The one PEP 562 loader (issue 30): a package's ``__getattr__`` that imports a public name's home module on
first use and keeps the value in the package's namespace, so a cold start loads only what it asks for.
It lives in ``protocol/``, the lowest layer, so every package may use it without an upward import."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_exports(package: str, namespace: dict[str, Any], homes: Mapping[str, str], *,
                 aliases: Mapping[str, str] | None = None, fallback: str | None = None) -> Callable[[str], Any]:
    """``__getattr__`` for ``package`` (whose globals are ``namespace``): ``homes`` maps a name to the submodule
    defining it; ``aliases`` maps a name to the name it re-exports; a name in neither is looked up in the
    ``fallback`` submodule when given. Unknown names raise ``AttributeError`` as a module would."""

    def __getattr__(name: str) -> Any:
        target = (aliases or {}).get(name, name)
        home = homes.get(target, fallback)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = import_module(f"{package}.{home}")  # never `from package import`: that asks this hook again
        try:
            value = getattr(module, target)
        except AttributeError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        namespace[name] = value
        return value

    return __getattr__
