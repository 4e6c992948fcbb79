"""Pinecone: a namespace per memory namespace in one serverless index (`backend.py`)."""

from adapters.pinecone.backend import PineconeBackend

__all__ = ["PineconeBackend"]
