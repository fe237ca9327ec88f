"""One audit run, shared by the command line, the server's jobs and the Python API."""
