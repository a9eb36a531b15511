"""Request tracing (Triton's trace extension): settings, sampling, and two outputs.

``settings.py`` holds the trace settings and their checks, ``trace.py`` one request's
trace, ``tracer.py`` samples requests and carries each trace to its sink, ``extension.py``
the data plane's trace methods, ``triton_file.py`` writes Triton's JSON trace file,
``otel.py`` exports OpenTelemetry spans (the optional extra ``conveyor[tracing]``), and
``config.py`` reads ``conveyor serve --trace-config``. See docs/tracing.md.
"""
