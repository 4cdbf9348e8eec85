"""`python -m holctl`: the same as the `holctl` console script."""

from holctl.cli import main

main()
