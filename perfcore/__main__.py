"""`python -m perfcore ...`: the same as `perfcore ...`."""

from perfcore.cli import main

# Guarded so that importing the module (a test imports every module) runs nothing.
if __name__ == "__main__":
    main()
