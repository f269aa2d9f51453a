# Source it from the checkout after scripts/setup.sh (`. scripts/env.sh`): where python3 is the system's externally
# managed one and setup.sh therefore installed vkbackend into the virtual environment .venv, it puts .venv/bin first
# on PATH, so that `python3` is the one vkbackend is installed in; elsewhere it changes nothing.
if [ -x .venv/bin/python3 ] && python3 scripts/externally_managed.py; then
  VIRTUAL_ENV="$PWD/.venv"
  PATH="$VIRTUAL_ENV/bin:$PATH"
  export VIRTUAL_ENV PATH
  hash -r 2>/dev/null || true
fi
