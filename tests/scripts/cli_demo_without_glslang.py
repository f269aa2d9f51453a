"""``vkbackend demo`` where no GLSL compiler is found: neither libglslang nor a glslangValidator, on PATH or from the
glsl extra (tests/test_cli.py). Exits with the command's status."""

import sys

import vkbackend.glsl as glsl
from vkbackend.__main__ import main

glsl._compilers = lambda: []  # no program found
glsl.glslang_lib.load = lambda: False  # and no library
sys.exit(main(["demo"]))
