"""``with`` blocks of devices: closed at the end of the block, and when the block raises, with the exception going on
(tests/test_context_managers.py: in a process of its own, because closing the device would close the one the other
tests share). Prints ok when every check has passed."""

import vkbackend

with vkbackend.devices()[0] as dev:
    assert not dev.closed
    dev.sync()
assert dev.closed, "not closed at the end of the block"
try:
    with vkbackend.devices()[0] as again:
        assert again is not dev and not again.closed
        raise KeyError("raised in the block")
except KeyError:
    pass
else:
    raise SystemExit("the block's exception was swallowed")
assert again.closed, "not closed when the block raised"
print("ok")
