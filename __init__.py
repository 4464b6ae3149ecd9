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
