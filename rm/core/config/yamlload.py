"""The YAML loader of configs: libyaml's safe loader, made quick on a large cluster listing.

A paper-scale config lists a thousand nodes' capacities and attributes: tens of thousands of
scalars, most of them a few hundred distinct texts repeated.  Two steps of PyYAML run in
Python for each scalar and are done once per distinct text here instead; the documents
loaded are the safe loader's, value for value.
"""

from __future__ import annotations

import yaml
from yaml.nodes import MappingNode, ScalarNode, SequenceNode

_TAG = "tag:yaml.org,2002:"
#: the scalar tags built here (immutable values: one object may stand for every repeat)
_SCALARS = frozenset(_TAG + t for t in ("null", "bool", "int", "float", "str"))
_SEQ, _MAP = _TAG + "seq", _TAG + "map"
#: keys PyYAML treats apart in a mapping: ``<<`` merges another mapping in, ``=`` is a value
_MERGE_KEYS = frozenset((_TAG + "merge", _TAG + "value"))


class _Unusual(Exception):
    """A node the quick construction leaves to PyYAML's (another tag, a merge key, a
    structure holding itself)."""


class YamlLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """libyaml's safe loader when present (~10x faster than the pure-Python one), with

    * each plain scalar's tag resolved once per text: resolution runs the implicit
      resolvers' regexes in Python for every scalar.  A plain scalar's tag depends only on
      its text, a quoted one's on nothing (no path resolvers are registered);
    * a document of plain mappings, lists and scalars (null, bool, int, float, str) built
      by one recursive walk, each distinct (tag, text) scalar constructed once, rather than
      by PyYAML's per-node generators and checks; anything else — another tag, a merge key
      ``<<``, an unhashable key, a recursive alias, nesting deeper than the recursion limit,
      a scalar its constructor refuses — is built by PyYAML itself, which raises its errors.
    """

    _tags: dict = {}

    def resolve(self, kind, value, implicit):
        if kind is ScalarNode and implicit[0]:          # plain: the tag of its text
            tag = self._tags.get(value)
            if tag is None:
                tag = self._tags[value] = super().resolve(kind, value, implicit)
            return tag
        return super().resolve(kind, value, implicit)

    def construct_document(self, node):
        try:
            return self._build(node, {}, {})
        except Exception:  # noqa: BLE001 -- _Unusual, an unhashable key, a bad scalar, too deep:
            # PyYAML builds it the library's way, raising the error it raises
            return super().construct_document(node)

    def _build(self, node, scalars: dict, made: dict):
        """The value of ``node``: ``scalars`` holds the values built per (tag, text), ``made``
        the lists and mappings per node (an alias is the same node: the same object)."""
        kind = node.__class__
        if kind is ScalarNode:
            key = (node.tag, node.value)
            value = scalars.get(key, scalars)
            if value is scalars:
                if node.tag not in _SCALARS:
                    raise _Unusual(node.tag)
                value = scalars[key] = self.yaml_constructors[node.tag](self, node)
            return value
        ident = id(node)
        if ident in made:
            value = made[ident]
            if value is None:               # an alias inside the node it names
                raise _Unusual("recursive")
            return value
        made[ident] = None
        if kind is SequenceNode and node.tag == _SEQ:
            value = [self._build(item, scalars, made) for item in node.value]
        elif kind is MappingNode and node.tag == _MAP:
            value = {}
            for key_node, value_node in node.value:
                if key_node.tag in _MERGE_KEYS:
                    raise _Unusual(key_node.tag)
                key = self._build(key_node, scalars, made)
                value[key] = self._build(value_node, scalars, made)     # an unhashable key: TypeError
        else:
            raise _Unusual(node.tag)
        made[ident] = value
        return value
