"""Hidden check: iniconfig.__version__ is the version git gave the build, as installed."""
import re
import subprocess
from importlib.metadata import version

import iniconfig

installed = version("iniconfig")
assert iniconfig.__version__ == installed, (iniconfig.__version__, installed)
assert "__version__" in iniconfig.__all__
# No tag in the oracle's repository: hatch-vcs gives 0.1.devN+g<short hash>.
short = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
assert re.fullmatch(r"0\.1\.dev\d+\+g[0-9a-f]+(\.d\d{8})?", installed), installed
assert short.startswith(installed.split("+g")[1][:7]) or installed.split("+g")[1].startswith(short[:7]), (installed, short)
config = iniconfig.IniConfig("x", data="[a]\nb = c\n")
assert config["a"]["b"] == "c"
print("ok", installed)
