"""Policies that are wrong in every way docs/policies.md lists (tests/test_plugins.py,
tests/test_plugin_replay.py load this file by path, as a user names a plugin)."""

import math
from rayrm import Policy

class NanUnit(Policy):
    def unit(self, app, cluster): return float("nan")

class NegativeUnit(Policy):
    def unit(self, app, cluster): return -1.0

class TextUnit(Policy):
    def unit(self, app, cluster): return "1"

class NanKey(Policy):
    def unit(self, app, cluster): return 0.0
    def key(self, app): return math.nan

class RaisesInUnit(Policy):
    def unit(self, app, cluster): return 1 / 0

class RaisesInKey(Policy):
    def unit(self, app, cluster): return 0.0
    def key(self, app): raise KeyError("boom")

class RaisesInNodeKey(Policy):
    per_node = True
    def unit(self, app, cluster): return 0.0
    def node_key(self, app, node, cluster): raise RuntimeError("boom")

class RaisesInChooseNode(Policy):
    best_fit = True
    def unit(self, app, cluster): return 1.0
    def choose_node(self, app, offered, cluster, among=None): raise RuntimeError("boom")

class ChoosesFirstNode(Policy):
    """Always node 0, full or not."""
    best_fit = True
    def unit(self, app, cluster): return 1.0
    def choose_node(self, app, offered, cluster, among=None): return cluster.nodes[0]

class WritesToView(Policy):
    def unit(self, app, cluster):
        app.running = 0
        return 1.0

class NoUnit(Policy):
    pass

class NotAPolicy:
    def unit(self, app, cluster): return 1.0
