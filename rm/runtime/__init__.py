"""The Ray runtime: the ResourceManager actor, the replay driver, its supervisor and
fault injector, and the ray-native baseline.

The only layer (with ``rayrm.nodes`` and ``rayrm.apps``) that imports Ray; imports every
layer below it.
"""
