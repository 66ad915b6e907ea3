"""`python -m robocompose`: the same command line as the `robocompose` script."""

from robocompose.cli import main

if __name__ == "__main__":
    main()
