"""`audit serve`: local indexes over the infini-gram API protocol, plus audit jobs.

    python -m audit.server --index demo --port 0

`create_app` builds the ASGI app, `serve` runs it, `main` is the command line.
"""
from audit.server.app import ServerLimits, create_app
from audit.server.engine import ServedIndex
from audit.server.messages import Limits, QueryError, QueryRequest
from audit.server.run import ServeError, load_indexes, main, serve
from audit.server.tokenizer import Tokenizer

__all__ = ["Limits", "QueryError", "QueryRequest", "ServeError", "ServedIndex", "ServerLimits", "Tokenizer", "create_app", "load_indexes", "main", "serve"]
