"""The wrapper a documentation example runs under (tests/test_docs_examples.py): ``docs_example.py SECONDS SCRIPT``
runs SCRIPT as __main__, then takes the validation layer's messages (collected in the native module, not printed)
and fails with them; a hang dumps every thread's stack after SECONDS, before the parent's timeout."""

import faulthandler
import os
import runpy
import sys

faulthandler.dump_traceback_later(int(sys.argv[1]), exit=True)
script = sys.argv[2]
sys.argv = [script]
sys.path[0] = os.path.dirname(os.path.abspath(script))  # the script's folder, not this one: as `python SCRIPT` has it
runpy.run_path(script, run_name="__main__")
if "vkbackend.discovery" in sys.modules:  # the example used vkbackend
    from vkbackend import testing

    messages = testing.validation_messages()
    if messages:
        sys.exit("validation layer messages:\n" + messages)
