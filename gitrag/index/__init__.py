"""Layer 2, index: from git objects to chunks, embeddings and the store, kept in sync.

    policy     which paths are indexed, and why the others are not
    chunking   tree-sitter chunks, symbols and their labels (CHUNKER_VERSION)
    embedders  the embedding models (static, local, ollama, hash) behind one protocol
    state      SQLite: branch manifests, membership, the journal; vector_cache: vectors by chunk
    store      the Qdrant collection (embedded Edge engine or a server)
    indexer    the sync: plan, journal, embed what is new, write, commit; pool: its workers
    views, vectors, sparse, symbols, history, integrity, heal, lock, held, workspace

Imports go to :mod:`gitrag.git` and the base modules (errors, config, identity, logs,
progress) only; tests/test_layers.py checks it.
"""
