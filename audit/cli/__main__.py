"""`python -m audit.cli`, the same command line as `audit`."""
from audit.cli import main

main()
