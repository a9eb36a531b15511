"""A live dashboard on the metrics port: one page (``static/``, no build step, nothing
fetched from the internet) fed by a JSON snapshot and server-sent events.

Why it costs serving nothing measurable: the snapshot reads only what the engine already
counts (``statistics()``, ``activity()``, the repository index) and the front ends'
latency histograms, once per second per server on a worker thread, however many pages
are open; each page gets the same bytes. Rates and percentiles come from differences
between those snapshots.
"""

from conveyor.server.dashboard.feed import DashboardFeed

__all__ = ["DashboardFeed"]
