"""Where requests enter, before any API sees them: the Host check (`hosts`), the Origin check
(`origins`), the body reader and its depth limit (`json_body`), and the middlewares that
apply them with the body-size limit, request counting, CORS and bugs as 500s (`middleware`).

May import the server's `config`, `error_shapes` and `prom`; nothing here knows an API.
"""
