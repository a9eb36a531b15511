"""Studies behind the figures in the docs: run from the checkout's root as
``python -m benchmarks.NAME`` (e.g. ``python -m benchmarks.run --quick``).

A package, not loose scripts, so the studies import each other (``benchmarks.common``) and
the tests import their measuring functions without touching ``sys.path``; it is not
installed with conveyor.
"""
