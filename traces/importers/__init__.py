"""Importers for public trace formats: one module per format (see ``rm/cli/trace.py``).

Each module exposes ``add_arguments(parser)`` (its INPUT positional and options),
``load(args, report) -> ImportResult`` and a plain-Python ``import_<format>(...)``.
"""
