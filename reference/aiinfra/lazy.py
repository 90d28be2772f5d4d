"""A chapter package's names, imported when first used.

``aiinfra.comm`` offers ``ring_all_reduce`` and the other collectives at its top
level; importing them there would import torch whenever anything of the package is
imported, the command line's light modules included (listing the commands, or
running a calculator, would take seconds). A chapter's ``__init__`` therefore
names what it offers and where it lives, and Python imports a module the first
time one of its names is asked for (PEP 562)::

    __getattr__, __dir__, __all__ = lazy.exports(
        __name__, {"aiinfra.comm.ring": ("ring_all_reduce", ...)}
    )
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def exports(
    package: str, modules: dict[str, tuple[str, ...]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``__getattr__``, ``__dir__`` and ``__all__`` of a package that offers names.

    Args:
        package: the package's ``__name__``.
        modules: module -> the names of it that the package offers.

    Returns:
        The three module attributes; a name is imported from its module on first
        use and is then an ordinary attribute of the package.
    """
    where = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where[name]), name)
        setattr(importlib.import_module(package), name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(importlib.import_module(package))) | set(where))

    return __getattr__, __dir__, sorted(where)
