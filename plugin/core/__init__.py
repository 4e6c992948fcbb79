"""The contract's rules: the service, searches, names, domain errors, the fingerprint rule.

No aiohttp and no wire models here (tests/service/test_layering.py checks the imports)."""
