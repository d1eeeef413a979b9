"""Where requests enter, before any API sees them: the Host check (`hosts`), the Origin check
(`origins`), the body reader and its depth limit (`json_body`), the middlewares that
apply them with the body-size limit, request counting, CORS and bugs as 500s (`middleware`),
and, with --fetch-image-urls, pictures named by URL fetched into the body (`image_urls`: it
knows the picture fields of the APIs' bodies, not the APIs).

May import the server's `config`, `error_shapes` and `prom`, and engine.documents' picture
checks; nothing here knows an API's routes.
"""
