"""Validate the numpydoc docstring of every public object of dpframe (run by ``.ci/run``).

Like pandas' ``scripts/validate_docstrings.py``: every object a user can reach through a
public ``__all__`` (and every public method and property of the public classes) is
checked with :func:`numpydoc.validate.validate`. A few checks are off for every object
(listed in ``IGNORED`` with the reason); the ``.dp`` accessor's methods must also have
See Also and Examples sections. Exit status 1 when anything fails, with one line each.

Run: ``python scripts/validate_docstrings.py``.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Iterator

from numpydoc.validate import validate

MODULES = (
    "dpframe",
    "dpframe.mechanisms",
    "dpframe.plotting",
    "dpframe.datasets",
    "dpframe.errors",
)

IGNORED = {
    "GL01": "dpframe's summaries start on the line of the opening quotes (PEP 257)",
    "ES01": "an extended summary is welcome, not required",
    "SA01": "See Also is required for the accessor methods only (checked below)",
    "EX01": "Examples are required for the accessor methods only (checked below)",
    "SS05": "summaries may start with a noun phrase ('The ledger of...')",
    "RT05": "a Returns description may end with a code span",
    "PR09": "a parameter description may end with a code span",
}
# The .dp accessor's public methods: drop-in pandas, so each shows where to go next and
# how it is used.
REQUIRED_FOR_ACCESSOR = ("SA01", "EX01")


def _public_members(cls: type) -> Iterator[str]:
    for name, member in vars(cls).items():
        if name.startswith("_"):
            continue
        if inspect.isfunction(member) or isinstance(member, property | classmethod | staticmethod):
            yield name


def objects() -> Iterator[tuple[str, bool]]:
    """(import path, is an accessor method) of every public object."""
    seen: set[str] = set()
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if name.startswith("__") or not (inspect.isclass(obj) or callable(obj)):
                continue  # modules are validated through their own __all__; constants have none
            path = f"{module_name}.{name}"
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            yield path, False
            if inspect.isclass(obj) and not issubclass(obj, BaseException):
                for member in _public_members(obj):
                    yield f"{path}.{member}", name == "DPAccessor"


def main() -> int:
    failures = []
    count = 0
    for path, accessor in objects():
        count += 1
        result = validate(path)
        for code, message in result["errors"]:
            if code in IGNORED and not (accessor and code in REQUIRED_FOR_ACCESSOR):
                continue
            failures.append(f"{path}: {code} {message}")
    for line in failures:
        print(line)
    print(f"numpydoc validation: {count} public objects, {len(failures)} problem(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
