"""The ResourceManager side of rayrm, in layers that import only downwards::

    core  ->  runs  ->  {sim, service, traces}  ->  offline  ->  {nodes, apps, ui}  ->  runtime  ->  cli

(``traces``, ``nodes`` and ``apps`` are the package's sibling subpackages; the bundled
``configs`` sit with ``sim``, ``service`` and ``traces``.)

* ``core`` — resources, constraints, cluster accounting, the online scheduler and its
  policies, job specs and configs: plain synchronous Python, no clock;
* ``runs`` — the run directory: one schema for the writer and the readers, metrics,
  check, report;
* ``sim`` — the discrete-event simulator (virtual clock) and its fault model;
* ``service`` — the RM's YARN protocol state machine (no Ray);
* ``traces`` — the Google-like generator and the importers of public trace formats;
* ``offline`` — progressive filling with its LP, and the sharing-property audit;
* ``nodes``, ``apps`` — the NodeManager and ApplicationMaster host actors;
* ``ui`` — the web UI and YARN's REST API over a live replay or a run directory;
* ``runtime`` — everything that drives Ray actors: the RM actor, the replay driver;
* ``cli`` — the ``rayrm`` command.

``tests/test_layers.py`` enforces the order.  docs/design.md has the whole picture.
"""
