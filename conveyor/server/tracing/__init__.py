"""Request tracing (Triton's trace extension): settings, sampling, and two outputs.

``settings.py`` holds the trace settings and their checks, ``tracer.py`` samples requests
and carries each trace to its sink, ``triton_file.py`` writes Triton's JSON trace file,
``otel.py`` exports OpenTelemetry spans (the optional extra ``conveyor[tracing]``), and
``config.py`` reads ``conveyor serve --trace-config``. See docs/tracing.md.
"""
