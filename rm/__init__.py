"""The ResourceManager side of rayrm, in layers that import only downwards::

    core  ->  runs  ->  {sim, service}  ->  offline  ->  (nodes, apps)  ->  runtime  ->  cli

* ``core`` — resources, constraints, cluster accounting, the online scheduler and its
  policies, job specs and configs: plain synchronous Python, no clock;
* ``runs`` — the run directory: one schema for the writer and the readers, metrics,
  check, report;
* ``sim`` — the discrete-event simulator (virtual clock) and its fault model;
* ``service`` — the RM's YARN protocol state machine (no Ray);
* ``offline`` — progressive filling with its LP, and the sharing-property audit;
* ``runtime`` — everything that drives Ray actors: the RM actor, the replay driver;
* ``cli`` — the ``rayrm`` command.

``tests/test_layers.py`` enforces the order.  docs/design.md has the whole picture.
"""
