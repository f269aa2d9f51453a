"""Exit 0 when pip may not install into this interpreter (PEP 668: an EXTERNALLY-MANAGED file beside its standard
library, and no virtual environment active), else 1. scripts/setup.sh asks it whether to make a virtual environment."""

import os
import sys
import sysconfig

managed = os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED"))
sys.exit(0 if managed and sys.prefix == sys.base_prefix else 1)
