"""enginetui: the live Textual dashboard of the inference engine, and its command line.

Installed, `enginetui.core` and `enginetui.kernels` are the repository's `core/` and `kernels/`
folders (setup.py maps them into this package). Run from a source checkout without installing
(the repository root on `sys.path`), they sit beside this package instead: the root joins the
package's search path so that the same imports resolve there.
"""

from pathlib import Path

_CHECKOUT_ROOT = Path(__file__).resolve().parent.parent  # the repository root, in a source checkout
if (_CHECKOUT_ROOT / "setup.py").is_file() and (_CHECKOUT_ROOT / "core" / "__init__.py").is_file():
    __path__.append(str(_CHECKOUT_ROOT))
