"""agpu: AnchorGPU's command line for customers and scripts, on the public API only."""

__version__ = "0.1.0"
