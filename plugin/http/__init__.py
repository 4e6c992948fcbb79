"""The HTTP server: app, routes, middleware, admin, wire models, the error envelope."""
