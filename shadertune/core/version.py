"""The package version, one definition: the root package and the command lines read it."""
__version__ = "0.1.0"
