"""The bundled experiment configs, installed as the package ``rayrm.configs`` (see pyproject.toml).

A regular package rather than a namespace one so that an editable install maps it too.
"""
