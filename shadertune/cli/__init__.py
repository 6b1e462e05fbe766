"""The command lines, one wing above every layer: python -m shadertune TOOL ..."""
