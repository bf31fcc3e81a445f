"""kevin: multi-turn RL for writing fast, correct GPU kernels.

The package is flat, one module per concept; the README lists them. Importing `kevin` is cheap:
no module imports torch at import time unless its whole job needs it.
"""

__version__ = "0.1.0"
