"""Task Share Fairness written as an outside plugin, for bench_plugin.py and the tests.

The same key as the built-in ``tsf`` (tsf-paper §V-A), key_i = n_i / (h_i w_i), through
nothing but the public API: ``--policy benchmarks/tsf_plugin.py:PluginTSF``.
"""

from rayrm import Policy


class PluginTSF(Policy):
    """Task Share Fairness as a plugin: key n_i / (h_i w_i)."""

    name = "plugin-tsf"

    def unit(self, app, cluster):
        return 1.0 / (app.h * app.weight) if app.h > 0 else float("inf")
