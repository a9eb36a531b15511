"""Triton compatibility at the edge: what Triton's own model code imports, served by Conveyor.

``pb_utils`` is Conveyor's ``triton_python_backend_utils``: a ``model.py`` written for
Triton's Python backend imports it under that name and runs unchanged (see
docs/triton-python-models.md). The adapter that drives ``TritonPythonModel`` lives with the
Python backend, in ``conveyor/backends/python_triton.py``.
"""
