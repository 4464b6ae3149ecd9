"""The compiled core (rayrm.rm.core.native): Cython extensions built by ``pip install``.

Everything else is in pyproject.toml.  When Cython or a C compiler is missing the build
says so in one line and installs the Python core alone; ``RAYRM_NATIVE_STRICT=1`` (CI)
makes that, and any compiler warning (``-Werror``), an error instead.
"""

import os
import shutil
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

STRICT = os.environ.get("RAYRM_NATIVE_STRICT") == "1"
FLAGS = ["-O2", "-Wall", "-Werror"] if STRICT else ["-O2"]
#: one extension per compiled module of the core (rayrm.rm.core.native.NATIVE_MODULES)
SOURCES = {"rayrm.rm.core.native._arrival": "rm/core/native/_arrival.pyx",
           "rayrm.rm.core.native._eventheap": "rm/core/native/_eventheap.pyx",
           "rayrm.rm.core.native._fairshare": "rm/core/native/_fairshare.pyx",
           "rayrm.rm.core.native._offer": "rm/core/native/_offer.pyx",
           "rayrm.rm.core.native._pending": "rm/core/native/_pending.pyx",
           "rayrm.rm.core.native._runlog": "rm/core/native/_runlog.pyx",
           "rayrm.rm.core.native._simloop": "rm/core/native/_simloop.pyx",
           "rayrm.rm.core.native._tree": "rm/core/native/_tree.pyx",
           "rayrm.rm.core.native._victims": "rm/core/native/_victims.pyx"}


class OptionalBuildExt(build_ext):
    """build_ext that falls back to the Python core instead of failing the install."""

    def run(self):
        try:
            super().run()
        except Exception as e:  # noqa: BLE001 - any build failure means: no compiled core
            self._skip(e)

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as e:  # noqa: BLE001
            self._skip(e)

    def _skip(self, e):
        if STRICT:
            raise e
        if getattr(self, "_said", False):       # one line, not one per step that failed
            return
        self._said = True
        print(f"rayrm: the compiled core was not built ({e}); the Python core will run", file=sys.stderr)


def extensions():
    try:
        from Cython.Build import cythonize
    except ImportError:
        if STRICT:
            raise
        print("rayrm: Cython is missing; the compiled core was not built, the Python core will run",
              file=sys.stderr)
        return []
    exts = [Extension(name, [src], extra_compile_args=FLAGS) for name, src in SOURCES.items()]
    return cythonize(exts, language_level=3, quiet=True, include_path=[_package_root()])


def _package_root() -> str:
    """A folder holding the core's .pxd files at their package path (rayrm/rm/core/native/,
    each level marked a package), whatever this checkout's own folder is called: Cython finds
    a module's declarations (``_eventheap.pxd``, cimported by ``_simloop``) by that path."""
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.join(here, "build", "cython-root")
    native = os.path.join(root, "rayrm", "rm", "core", "native")
    os.makedirs(native, exist_ok=True)
    for level in ("rayrm", "rayrm/rm", "rayrm/rm/core", "rayrm/rm/core/native"):
        open(os.path.join(root, level, "__init__.pxd"), "a").close()
    source = os.path.join(here, "rm", "core", "native")
    for name in os.listdir(source):
        if name.endswith(".pxd"):
            shutil.copyfile(os.path.join(source, name), os.path.join(native, name))
    return root


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
