"""The V2 HTTP/REST front end: routes, and the two ways they are served.

- ``connection.py``: HTTP/1.1 on httptools directly, what ``conveyor serve`` runs (the V2
  port and, with other routes, the metrics port);
- ``asgi.py``: the same routes as a bare ASGI app, for users who mount Conveyor inside
  their own ASGI server.
"""
