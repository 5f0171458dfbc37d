"""enginetui: the live Textual dashboard of the inference engine, and its command line.

The repository's `core/` and `kernels/` folders are `enginetui.core` and `enginetui.kernels`: setup.py maps
them into this package, installed or editable (`pip install -e .`).
"""
