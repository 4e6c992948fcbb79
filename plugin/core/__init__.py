"""The contract's rules: the service, searches, names, domain errors, the fingerprint rule;
no aiohttp and no wire models (tests/house/test_layering.py checks the imports)."""
