"""Whether the instance loaded the validation layer and whether vkbackend logs at DEBUG, under the environment the
test sets (tests/test_environment.py: VKBACKEND_VALIDATION=off and VKBACKEND_DEBUG=false)."""

import logging

import vkbackend
from vkbackend.discovery import Instance

vkbackend.devices()
print(Instance._current.validation, logging.getLogger("vkbackend").isEnabledFor(logging.DEBUG))
