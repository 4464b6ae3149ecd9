"""Where the RM actor runs, and how a policy from outside rayrm gets there.

The RM runs on the driver's Ray node unless a node offers the custom resource
``RM_RESOURCE`` (``ray start --resources '{"rayrm_rm": 1}'``).  A policy plugin
(``FILE.py:Class``, ``package.module:Class``) may exist only on the machine that launched
the replay, so its file or top-level package travels with the RM actor as ``py_modules``
(docs/policies.md, "On Ray").
"""

from __future__ import annotations

from rayrm.rm.core.policies.plugins import ship_paths

#: a Ray node offering this custom resource hosts the RM
RM_RESOURCE = "rayrm_rm"


def rm_node() -> str | None:
    """The id of the alive Ray node offering ``RM_RESOURCE``, or None."""
    import ray  # noqa: PLC0415
    return next((n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get(RM_RESOURCE)), None)


def rm_runtime_env(policy: str) -> dict:
    """``options`` for the RM actor: ``runtime_env`` shipping a policy from outside rayrm
    (its file, or its top-level package) to whichever Ray node runs the RM, and to the
    node a restarted RM lands on.  Ray takes local paths in ``py_modules`` at the job level
    only, so they are uploaded here (to the cluster's GCS, as ``ray.init`` does for a job)
    and the actor is given their URIs."""
    import tempfile  # noqa: PLC0415

    from ray._private.runtime_env.py_modules import upload_py_modules_if_needed  # noqa: PLC0415
    paths = ship_paths(policy)
    if not paths:
        return {}
    with tempfile.TemporaryDirectory(prefix="rayrm-py-modules-") as scratch:
        env = upload_py_modules_if_needed({"py_modules": paths}, include_gitignore=True, scratch_dir=scratch)
    return {"runtime_env": env}
