"""The V2 HTTP/REST front end: routes shared by two implementations picked by name.

- ``protocol.py``: HTTP/1.1 on httptools directly (default, fastest);
- ``asgi.py``: the same routes as a bare ASGI app, served by uvicorn (``--http-impl uvicorn``).

``protocol.http_front_end(routes, host, port, max_body_bytes=..., impl=...)`` picks one.
"""
