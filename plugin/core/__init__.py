"""The contract's rules: the service, searches, names, domain errors, the fingerprint rule.

No aiohttp and no wire models here (tests/house/test_layering.py checks the imports)."""
