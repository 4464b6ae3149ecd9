"""The ``rayrm`` command line: ``main`` parses the subcommand, each module here is one
subcommand with ``add_arguments(parser)`` and ``run(args) -> int``.

The top layer: imports anything, heavy libraries inside ``run`` so start-up stays quick.
"""
