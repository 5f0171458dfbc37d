"""Installs the repository's three top-level folders as one package, `enginetui`.

`core/` and `kernels/` stay top-level folders in the repository but install as `enginetui.core` and
`enginetui.kernels` (setuptools' package-dir mapping), so `pip install` puts nothing in
site-packages under a generic name (`kernels` is also a PyPI package). Everything else is in
pyproject.toml.
"""

from setuptools import find_packages, setup

MAPPED = ("core", "kernels")  # repository folders installed inside `enginetui`

setup(
    packages=find_packages(include=["enginetui", "enginetui.*"])
    + [
        f"enginetui.{name}" for name in find_packages(include=[f"{top}{rest}" for top in MAPPED for rest in ("", ".*")])
    ],
    package_dir={f"enginetui.{top}": top for top in MAPPED},
)
