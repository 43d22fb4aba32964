"""dnscost: measure what DNS transports cost resolvers."""

__all__ = ["__version__"]

__version__ = "0.1.0"
