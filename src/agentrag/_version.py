"""The package version (a leaf module, so any layer may read it without importing the package root)."""

__version__ = "0.1.0"
