"""Make the repository importable as ``ansible_collections.gpucloud.fleet``.

Modules and filters import their helpers by the collection path, exactly as
Ansible loads them on a target. The unit tests do the same through a symlink
``.cache/collections/ansible_collections/gpucloud/fleet`` -> repository root,
created here on first use.
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS = os.path.join(ROOT, ".cache", "collections")
LINK = os.path.join(COLLECTIONS, "ansible_collections", "gpucloud", "fleet")
FIXTURES = os.path.join(ROOT, "tests", "fixtures")

if not os.path.lexists(LINK):
    os.makedirs(os.path.dirname(LINK), exist_ok=True)
    os.symlink(os.path.relpath(ROOT, os.path.dirname(LINK)), LINK)
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)
