"""The V2 HTTP/REST front end: routes, and the two ways they are served.

- HTTP/1.1 on httptools directly, what ``conveyor serve`` runs (the V2 port and, with
  other routes, the metrics port), in four modules: ``parser.py`` (bytes to requests, no
  I/O), ``responses.py`` (answers to bytes), ``connection.py`` (the asyncio glue, one
  protocol per connection) and ``listener.py`` (accepts, timers, graceful stop);
- ``asgi.py``: the same routes as a bare ASGI app, for users who mount Conveyor inside
  their own ASGI server.
"""
