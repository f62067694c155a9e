"""Example Spark pipelines on graymq; see ``jobs/README.md``."""
