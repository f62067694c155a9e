"""Use cases of the name server: each service runs one request's unit of work on a session."""
