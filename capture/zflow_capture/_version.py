__version__ = "0.1.0"

# The trace format this package writes (docs/trace-format.md).
FORMAT = "zflow-trace"
VERSION = 1
