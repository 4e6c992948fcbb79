"""memory-plugin-vector: the v1 memory-plugin contract on a vector database."""

CONTRACT_VERSION = "1.0.0"
CAPABILITIES = ("embedding", "ttl", "pin")
