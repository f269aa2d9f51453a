"""What pip does for ``pip install -e`` up to the wheel (``python -m build`` makes no editable wheels): PEP 660's
build_editable of the source tree of the first argument, in an isolated environment, into the folder of the second
(tests/test_packaging.py)."""

import sys

from build import ProjectBuilder
from build.env import DefaultIsolatedEnv

with DefaultIsolatedEnv() as env:
    builder = ProjectBuilder.from_isolated_env(env, sys.argv[1])
    env.install(builder.build_system_requires)
    env.install(builder.get_requires_for_build("editable"))
    builder.build("editable", sys.argv[2])
