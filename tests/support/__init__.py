"""What tests share: factories, world builders, waiting, races, SSH keys and machines.

A test module imports its helpers from here (or from a conftest.py for fixtures), never from
another test module.
"""
