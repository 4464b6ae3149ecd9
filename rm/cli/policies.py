"""``rayrm policies``: the built-in policies and the installed plugins, one line each.

Each row: the name ``--policy`` takes, the first line of the class's docstring, and
where it comes from (built-in, or the distribution whose ``rayrm.policies`` entry point
names it).  A policy in a file or module needs no installing: name it as
``path/to/file.py:Class`` or ``package.module:Class`` (docs/policies.md).
"""

from __future__ import annotations


def add_arguments(parser) -> None:
    parser.add_argument("--origin", action="store_true", help="also show each policy's class and source")


def run(args) -> int:
    from rayrm.rm.core.policies.plugins import installed_policies  # noqa: PLC0415

    rows = installed_policies()
    width = max(len(name) for name, _, _ in rows)
    for name, doc, origin in rows:
        kind = origin.split(" (")[0]
        print(f"{name:<{width}}  {doc}  [{origin if args.origin else kind}]")
    print("a plugin in a file or module: --policy path/to/file.py:Class or --policy package.module:Class "
          "(docs/policies.md)")
    return 0
