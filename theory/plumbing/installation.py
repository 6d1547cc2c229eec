"""The package that runs is the package: every entry point refuses, in one line (exit 2), to
run with a ``theory``, ``simulate``, ``verify`` or ``figures`` that is not this
installation's.

The four names are generic: a ``theory.py`` (or a ``simulate/`` package of another project)
in the working folder, which Python searches first, or earlier on ``PYTHONPATH``, was
imported in the package's place -- ``python -m verify.rates`` then ran with whatever it
defined, or ended in an ``ImportError`` traceback that did not say why.

The rule: each of the four packages an entry point uses resolves to
``ROOT/NAME/__init__.py``, ROOT the folder that holds this installation's ``theory`` (the
folder of this file's package's package): all four under one parent, each a regular
package.  A wheel (all four in ``site-packages``), an editable install (all four in its
checkout) and a checkout on ``PYTHONPATH`` all pass it.

Checked twice, each time at no noticeable cost (a spec lookup per name, nothing imported):

* while ``python -m PACKAGE.X`` starts, in each package's ``__init__``
  (:func:`refuse_shadows` for the package started and those it imports, to its left in
  theory -> simulate -> verify -> figures), before any other package of the toolkit is
  imported: this file is run from its path (``runpy.run_path``), since importing it as
  ``theory.plumbing.installation`` would import the very ``theory`` it is to check;
* in :func:`theory.plumbing.cli.run_main`, for the packages the process imported
  (:func:`refuse_imported`).

What no check inside the packages can see: ``python -m NAME...`` where NAME itself is
shadowed (a ``verify.py`` beside ``python -m verify.rates``): Python then finds the other
file before any of this installation's code runs; ``python -P`` (Python 3.11+) leaves the
working folder out of the search.

Only the standard library is imported here.
"""

from __future__ import annotations

import importlib.util
import os
import sys

__all__ = ["PACKAGES", "ROOT", "refuse_imported", "refuse_shadows", "shadowing"]

# the toolkit's top-level packages, in the order of the data flow
PACKAGES = ("theory", "simulate", "verify", "figures")
# the folder holding this installation's packages (this file is ROOT/theory/plumbing/...)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

EXIT_SHADOWED = 2


def _origin(name: str) -> str | None:
    """Where ``import NAME`` takes (or took) the package from, found without importing it:
    the imported module's file, else the import system's spec (a namespace package, a
    folder without ``__init__.py``, has none).  ``""`` when nothing of that name exists."""
    module = sys.modules.get(name)
    if module is not None:
        return getattr(module, "__file__", None)
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return ""
    return spec.origin if spec.has_location else None


def shadowing(names=PACKAGES, root: str = ROOT) -> tuple[str, str | None] | None:
    """``(name, what it resolves to)`` of the first of ``names`` that is not
    ``root/NAME/__init__.py`` (None: a folder without ``__init__.py``), or None when all
    are this installation's.  A name that resolves to nothing is left to the import that
    needs it."""
    for name in names:
        origin = _origin(name)
        if origin == "":
            continue
        expected = os.path.join(root, name, "__init__.py")
        if origin is None or not _same(origin, expected):
            return name, origin
    return None


def _same(a: str, b: str) -> bool:
    return os.path.normcase(os.path.realpath(a)) == os.path.normcase(os.path.realpath(b))


def _refuse(found: tuple[str, str | None], root: str) -> None:
    name, origin = found
    what = origin if origin is not None else "a folder without __init__.py"
    print(
        f"error: {name} is {what}, not this installation's package"
        f" ({os.path.join(root, name, '__init__.py')}): a file or folder named {name} in the"
        " working folder or on PYTHONPATH shadows it; rename it, run from another folder, or"
        " start with python -P (the working folder not searched)",
        file=sys.stderr,
        flush=True,
    )
    raise SystemExit(EXIT_SHADOWED)


def refuse_shadows(started: str, root: str = ROOT) -> None:
    """While ``python -m STARTED.X`` starts: one line on stderr and exit 2
    (``SystemExit``) unless ``started`` and the packages it imports (those before it in
    :data:`PACKAGES`) are this installation's (:func:`shadowing`)."""
    names = PACKAGES[: PACKAGES.index(started) + 1]
    found = shadowing(names, root)
    if found is not None:
        _refuse(found, root)


def refuse_imported(root: str = ROOT) -> None:
    """One line and exit 2 (``SystemExit``) unless every one of the four packages this
    process has imported is this installation's."""
    found = shadowing([n for n in PACKAGES if n in sys.modules], root)
    if found is not None:
        _refuse(found, root)
