"""Which scheduling core runs: the compiled one (the modules of ``NATIVE_MODULES``, built from
Cython by ``pip install``) or the Python reference, chosen by ``RAYRM_CORE``.  The compiled
core is all of its modules: it counts as built only when every one of them imports.

* ``RAYRM_CORE=python``: the Python core, always;
* ``RAYRM_CORE=native``: the compiled core, or an ``InputError`` (one line) when it was not built;
* unset (or empty): the compiled core when it was built, else the Python one.

Both cores give the same decisions (tests/test_native.py compares them step by step); the
compiled one only runs them faster.  docs/design.md, "Native core", lists what is compiled.
"""

from __future__ import annotations

import functools
import importlib
import os

from rayrm.rm.core.errors import InputError

CORES = ("python", "native")
#: the compiled modules (setup.py builds one extension per name); the core needs them all
NATIVE_MODULES = ("_arrival", "_eventheap", "_fairshare", "_offer", "_pending", "_runlog", "_simloop", "_tree", "_victims")
_PACKAGE = "rayrm.rm.core.native"


def native_module(name: str = "_eventheap"):
    """The compiled module ``name`` of the core, or None when the core was not built (any of
    its modules missing: a half-built core is not selected)."""
    if name not in NATIVE_MODULES:
        raise ValueError(f"{name!r} is not a module of the native core ({', '.join(NATIVE_MODULES)})")
    if not native_built():
        return None
    return importlib.import_module(f"{_PACKAGE}.{name}")


@functools.cache
def compiled(name: str):
    """The compiled module ``name``, imported once (the hot path's lookup); the caller has
    selected the native core (``core_name``), so it is built."""
    return importlib.import_module(f"{_PACKAGE}.{name}")


def native_built() -> bool:
    """Every compiled module of the core imports."""
    try:
        for name in NATIVE_MODULES:
            importlib.import_module(f"{_PACKAGE}.{name}")
    except ImportError:
        return False
    return True


def core_name(env: dict | None = None) -> str:
    """'python' or 'native', from ``RAYRM_CORE`` (module docstring)."""
    wanted = (os.environ if env is None else env).get("RAYRM_CORE", "").strip().lower()
    if wanted not in ("",) + CORES:
        raise InputError(f"RAYRM_CORE must be 'python' or 'native', got {wanted!r}", field="RAYRM_CORE")
    if wanted == "python":
        return "python"
    built = native_built()
    if wanted == "native" and not built:
        raise InputError("RAYRM_CORE=native but the compiled core is not built "
                         "(pip install -e . builds it; it needs gcc and the Python headers)",
                         field="RAYRM_CORE")
    return "native" if built else "python"


def core_info() -> str:
    """One line for ``rayrm --version``: which core runs, and why when it is the Python one."""
    try:
        name = core_name()
    except InputError as e:
        return f"core: {e}"
    if name == "native":
        return "core: native (compiled)"
    if os.environ.get("RAYRM_CORE", "").strip().lower() == "python":
        return "core: python (RAYRM_CORE=python)"
    return "core: python (the compiled core was not built; pip install -e . builds it)"
