"""Importers for public trace formats: one module per format (see ``rm/cli/trace.py``).

Each format module exposes ``add_arguments(parser)`` (its INPUT positional and options),
``load(args, report) -> ImportResult`` and a plain-Python ``import_<format>(...)``.
``rumen`` and ``synth`` are not formats of their own: they turn Rumen job histories and
SYNTH specs into SLS job objects for ``sls``, as Hadoop's SLS takes all three.
``common`` holds what they share (skip report, amounts, tokens, the config writer;
``reading`` JSON streams and tables), ``queues`` the queue tree (``--queue-file``,
``--queue-weights``) with ``queue_files`` reading YARN's Fair and Capacity Scheduler files,
``sls_nodes`` SLS's node file and labels.  Importers import only ``rayrm.rm.core`` and each
other, downwards: sls -> rumen, synth, queues -> queue_files, sls_nodes -> common, reading.
"""
