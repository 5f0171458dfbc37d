"""Holds the sitecustomize.py that a Python started with this folder on its path runs first (kernels/cpu_isa.py)."""
