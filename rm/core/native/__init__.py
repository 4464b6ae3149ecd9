"""Which scheduling core runs: the compiled one (``rayrm.rm.core.native._eventheap``, built from
Cython by ``pip install``) or the Python reference, chosen by ``RAYRM_CORE``.

* ``RAYRM_CORE=python``: the Python core, always;
* ``RAYRM_CORE=native``: the compiled core, or an ``InputError`` (one line) when it was not built;
* unset (or empty): the compiled core when it was built, else the Python one.

Both cores give the same decisions (tests/test_native.py compares them step by step); the
compiled one only runs them faster.  docs/design.md, "Native core", lists what is compiled.
"""

from __future__ import annotations

import importlib
import os

from rayrm.rm.core.errors import InputError

CORES = ("python", "native")
#: the compiled module and what it must define
NATIVE_MODULE = "rayrm.rm.core.native._eventheap"
#: every compiled module: the native core runs only when all of them were built
NATIVE_MODULES = (NATIVE_MODULE, "rayrm.rm.core.native._runlog")


def native_module(name: str = NATIVE_MODULE):
    """The compiled module ``name``, or None when the extensions were not (all) built."""
    try:
        modules = {m: importlib.import_module(m) for m in NATIVE_MODULES}
    except ImportError:
        return None
    return modules[name]


def core_name(env: dict | None = None) -> str:
    """'python' or 'native', from ``RAYRM_CORE`` (module docstring)."""
    wanted = (os.environ if env is None else env).get("RAYRM_CORE", "").strip().lower()
    if wanted not in ("",) + CORES:
        raise InputError(f"RAYRM_CORE must be 'python' or 'native', got {wanted!r}", field="RAYRM_CORE")
    if wanted == "python":
        return "python"
    built = native_module() is not None
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
