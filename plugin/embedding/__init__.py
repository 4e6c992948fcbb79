"""Dense and keyword vectors: the encoders, their runtimes, the batcher."""
