"""Triton where it is installed: the one import that every kernel module makes.

A module of kernels runs ``triton, tl, jit, HAS_TRITON = import_triton()`` at import
time. Without Triton (a CPU-only install) ``jit`` leaves the kernel a plain function
and ``HAS_TRITON`` is false, so the rest of the package imports and the kernel's
launcher can say which package is missing. On a CPU the tests set
``TRITON_INTERPRET=1`` before this runs, so that the kernels run in Triton's
interpreter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def _no_jit(fn: Callable) -> Callable:
    """Stand-in for ``triton.jit``, so that a kernel can still be defined."""
    return fn


def import_triton() -> tuple[Any, Any, Callable, bool]:
    """``(triton, triton.language, triton.jit, True)``, or ``(None, None, id, False)``.

    Called at the kernel module's import, not cached: a test that hides Triton
    (``sys.modules["triton"] = None``) and imports the module again sees it missing.
    """
    try:
        import triton
        import triton.language as tl
    except ImportError:  # the rest of the package must not need Triton
        return None, None, _no_jit, False
    return triton, tl, triton.jit, True
