"""gpubench: the single-GPU efficient-training ablations, measured on your own hardware."""

__version__ = "0.1.0"


def version() -> str:
    """The installed distribution's version; __version__ when running from a checkout."""
    from importlib import metadata

    try:
        return metadata.version("gpubench")
    except metadata.PackageNotFoundError:
        return __version__
