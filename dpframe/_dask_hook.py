"""Registering ``.dp`` on Dask DataFrames without importing Dask at ``import dpframe``.

Importing ``dask.dataframe`` costs more than numpy and pandas together, so dpframe never
does it itself. If ``dask.dataframe`` is already imported, the Dask backend (which
registers the accessor) is imported right away; otherwise a finder on ``sys.meta_path``
waits for ``dask.dataframe`` to be imported, by anyone, and imports the backend right
after that module has finished loading. Users write ``import dpframe`` and
``import dask.dataframe as dd`` in either order, and ``ddf.dp`` works.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import threading
import types
from collections.abc import Sequence

__all__ = ["register_dask_when_imported"]

_TARGET = "dask.dataframe"
_BACKEND = "dpframe._backends.dask_backend"
_LOCK = threading.Lock()


def _register() -> None:
    importlib.import_module(_BACKEND)


class _LoaderThenRegister(importlib.abc.Loader):
    """Runs the real loader of ``dask.dataframe``, then registers dpframe's backend."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self._loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self._loader.exec_module(module)
        _register()


class _WaitForDask(importlib.abc.MetaPathFinder):
    """Finds nothing itself; wraps the loader of ``dask.dataframe`` once it is imported."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != _TARGET:
            return None
        _remove_finder()
        spec = importlib.util.find_spec(fullname)  # the real finders, this one removed
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _LoaderThenRegister(spec.loader)
        return spec


def _remove_finder() -> None:
    with _LOCK:
        sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _WaitForDask)]


def register_dask_when_imported() -> None:
    """Register the Dask backend now if Dask's DataFrame is loaded, else once it is."""
    if _TARGET in sys.modules:
        _register()
        return
    with _LOCK:
        if not any(isinstance(f, _WaitForDask) for f in sys.meta_path):
            sys.meta_path.insert(0, _WaitForDask())
