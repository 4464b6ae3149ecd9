"""rayrm: a YARN-style resource manager that replays cluster traces on Ray.

The repository root is this package; its directories are the subpackages:

* ``rayrm.rm`` — the ResourceManager: scheduling core, simulator, protocol service,
  Ray runtime, run directories, offline solver, command line;
* ``rayrm.nodes`` — NodeManager hosts (Ray actors);
* ``rayrm.apps`` — ApplicationMaster hosts (Ray actors);
* ``rayrm.traces`` — trace importers and the synthetic workload generator;
* ``rayrm.configs`` — the bundled experiment configs (package data).

docs/design.md is the architecture and the reference for the formulas.
"""

#: the public policy API (docs/policies.md), imported on first use so that ``import rayrm``
#: stays light: ``from rayrm import Policy, AppView, NodeView, ClusterView, PolicyError``
_PUBLIC = {"Policy": "rayrm.rm.core.policies.base", "PolicyError": "rayrm.rm.core.policies.base",
           "AppView": "rayrm.rm.core.views", "NodeView": "rayrm.rm.core.views",
           "ClusterView": "rayrm.rm.core.views"}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    if name in _PUBLIC:
        import importlib
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'rayrm' has no attribute {name!r}")
