"""What the tests and the benchmarks both run the plugin with; neither ships in the image.

A real server in a child process (`server_process`), a client that behaves as the
platform's does (`platform_client`), raw HTTP for half-open connections (`raw_http`),
a throwaway postgres server (`postgres_server`), Pinecone faked at the HTTP level with
its recorded shapes (`pinecone_fake` and its parts, `pinecone_backend`), and a manual
clock (`clocks`).
"""
