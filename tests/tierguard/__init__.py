"""The fast tier's guard against task code (tests/conftest.py); ``sitecustomize`` carries it
into every Python child of a test."""
