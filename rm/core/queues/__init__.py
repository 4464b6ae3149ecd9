"""The queue tree: its config (``tree``), its accounting at run time (``state``) and the
scheduler that offers nodes down it (``scheduler``); docs/design.md, "Queues"."""

from rayrm.rm.core.queues.tree import QueueSpec, QueueTree, default_tree, parse_queues

__all__ = ["QueueSpec", "QueueTree", "default_tree", "parse_queues"]
