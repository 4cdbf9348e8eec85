"""`python -m holmcp`: the same as the `holmcp` console script."""

from holmcp.server import main

main()
