"""A Qdrant server through qdrant-client, in the tenant or per-namespace collection layout."""
