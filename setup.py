"""The package list, found: everything under loadgen/ and tui/, plus ``loadgen.builtin_profiles``, which lives
in profiles/ (pyproject.toml's package-dir). pyproject.toml alone cannot say both: ``packages.find`` only sees
folders as they are named on disk. Everything else about the build is in pyproject.toml."""

from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["loadgen", "loadgen.*", "tui", "tui.*"]), "loadgen.builtin_profiles"])
