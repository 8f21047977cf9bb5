"""The SQLite ledger's schema, as an ordered list of migrations.

Migration ``n`` takes a ledger from version ``n - 1`` to ``n``. A ledger is migrated
forward on open, in one transaction per step; a ledger whose version is above
:data:`SCHEMA_VERSION` was written by a newer palace-retrievers and is refused.
"""

from __future__ import annotations

MIGRATIONS: tuple[str, ...] = (
    # 1: drawers, sources, closets, full-text indexes.
    """
    CREATE TABLE meta (
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );

    CREATE TABLE sources (
        wing              TEXT NOT NULL,
        source_key        TEXT NOT NULL,
        location          TEXT NOT NULL,
        content_hash      TEXT NOT NULL,
        mtime             REAL,
        normalize_version INTEGER NOT NULL,
        mined_at          TEXT NOT NULL,
        drawer_count      INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (wing, source_key)
    );

    CREATE TABLE drawers (
        rowid             INTEGER PRIMARY KEY,
        id                TEXT NOT NULL UNIQUE,
        text              TEXT NOT NULL,
        wing              TEXT NOT NULL,
        room              TEXT NOT NULL,
        source            TEXT NOT NULL,
        source_key        TEXT,
        chunk_index       INTEGER NOT NULL DEFAULT 0,
        line_start        INTEGER,
        line_end          INTEGER,
        source_mtime      REAL,
        normalize_version INTEGER NOT NULL DEFAULT 0,
        filed_at          TEXT NOT NULL,
        content_date      TEXT,
        ts                REAL NOT NULL,
        user_id           TEXT NOT NULL DEFAULT '',
        kind              TEXT NOT NULL DEFAULT 'drawer',
        metadata          TEXT NOT NULL DEFAULT '{}',
        embedding         BLOB,
        embedding_model   TEXT,
        FOREIGN KEY (wing, source_key) REFERENCES sources (wing, source_key)
            ON DELETE CASCADE
    );
    CREATE INDEX drawers_wing_room ON drawers (wing, room);
    CREATE INDEX drawers_user ON drawers (user_id, kind);
    CREATE INDEX drawers_source ON drawers (wing, source_key, chunk_index);
    CREATE INDEX drawers_ts ON drawers (ts);

    CREATE TABLE closets (
        rowid           INTEGER PRIMARY KEY,
        id              TEXT NOT NULL UNIQUE,
        line            TEXT NOT NULL CHECK (length(line) <= 1500),
        wing            TEXT NOT NULL,
        room            TEXT NOT NULL,
        source_key      TEXT,
        user_id         TEXT NOT NULL DEFAULT '',
        extractor       TEXT NOT NULL,
        filed_at        TEXT NOT NULL,
        ts              REAL NOT NULL,
        embedding       BLOB,
        embedding_model TEXT
    );
    CREATE TABLE closet_drawers (
        closet_id TEXT NOT NULL REFERENCES closets (id) ON DELETE CASCADE,
        drawer_id TEXT NOT NULL REFERENCES drawers (id) ON DELETE CASCADE,
        PRIMARY KEY (closet_id, drawer_id)
    );
    CREATE INDEX closet_drawers_drawer ON closet_drawers (drawer_id);

    -- Word tokens (Latin scripts and the like) and trigrams (Chinese, Japanese, substrings).
    CREATE VIRTUAL TABLE drawers_fts USING fts5 (
        text, content = 'drawers', content_rowid = 'rowid',
        tokenize = 'unicode61 remove_diacritics 2'
    );
    CREATE VIRTUAL TABLE drawers_trigram USING fts5 (
        text, content = 'drawers', content_rowid = 'rowid', tokenize = 'trigram'
    );
    CREATE TRIGGER drawers_ai AFTER INSERT ON drawers BEGIN
        INSERT INTO drawers_fts (rowid, text) VALUES (new.rowid, new.text);
        INSERT INTO drawers_trigram (rowid, text) VALUES (new.rowid, new.text);
    END;
    CREATE TRIGGER drawers_ad AFTER DELETE ON drawers BEGIN
        INSERT INTO drawers_fts (drawers_fts, rowid, text) VALUES ('delete', old.rowid, old.text);
        INSERT INTO drawers_trigram (drawers_trigram, rowid, text)
            VALUES ('delete', old.rowid, old.text);
    END;
    CREATE TRIGGER drawers_au AFTER UPDATE OF text ON drawers BEGIN
        INSERT INTO drawers_fts (drawers_fts, rowid, text) VALUES ('delete', old.rowid, old.text);
        INSERT INTO drawers_trigram (drawers_trigram, rowid, text)
            VALUES ('delete', old.rowid, old.text);
        INSERT INTO drawers_fts (rowid, text) VALUES (new.rowid, new.text);
        INSERT INTO drawers_trigram (rowid, text) VALUES (new.rowid, new.text);
    END;
    """,
    # 2: where each source was mined from, and the vector-index journal.
    """
    ALTER TABLE sources ADD COLUMN root TEXT;
    ALTER TABLE sources ADD COLUMN plugin TEXT;
    CREATE INDEX sources_root ON sources (root, wing);

    -- Ids whose vector-index entry may not match the ledger yet. Triggers write them in
    -- the same transaction as the change; they are cleared once the index has caught up,
    -- so whatever a killed writer left behind is replayed by the next one. (NOT EXISTS,
    -- not INSERT OR IGNORE: an upsert's conflict clause would override the trigger's.)
    CREATE TABLE index_pending (
        collection TEXT NOT NULL,
        id         TEXT NOT NULL,
        PRIMARY KEY (collection, id)
    ) WITHOUT ROWID;
    CREATE TRIGGER drawers_pending_ai AFTER INSERT ON drawers BEGIN
        INSERT INTO index_pending SELECT 'drawers', new.id WHERE NOT EXISTS
            (SELECT 1 FROM index_pending WHERE collection = 'drawers' AND id = new.id);
    END;
    CREATE TRIGGER drawers_pending_au AFTER UPDATE ON drawers BEGIN
        INSERT INTO index_pending SELECT 'drawers', old.id WHERE NOT EXISTS
            (SELECT 1 FROM index_pending WHERE collection = 'drawers' AND id = old.id);
        INSERT INTO index_pending SELECT 'drawers', new.id WHERE NOT EXISTS
            (SELECT 1 FROM index_pending WHERE collection = 'drawers' AND id = new.id);
    END;
    CREATE TRIGGER drawers_pending_ad AFTER DELETE ON drawers BEGIN
        INSERT INTO index_pending SELECT 'drawers', old.id WHERE NOT EXISTS
            (SELECT 1 FROM index_pending WHERE collection = 'drawers' AND id = old.id);
    END;
    CREATE TRIGGER closets_pending_ai AFTER INSERT ON closets BEGIN
        INSERT INTO index_pending SELECT 'closets', new.id WHERE NOT EXISTS
            (SELECT 1 FROM index_pending WHERE collection = 'closets' AND id = new.id);
    END;
    CREATE TRIGGER closets_pending_au AFTER UPDATE ON closets BEGIN
        INSERT INTO index_pending SELECT 'closets', old.id WHERE NOT EXISTS
            (SELECT 1 FROM index_pending WHERE collection = 'closets' AND id = old.id);
        INSERT INTO index_pending SELECT 'closets', new.id WHERE NOT EXISTS
            (SELECT 1 FROM index_pending WHERE collection = 'closets' AND id = new.id);
    END;
    CREATE TRIGGER closets_pending_ad AFTER DELETE ON closets BEGIN
        INSERT INTO index_pending SELECT 'closets', old.id WHERE NOT EXISTS
            (SELECT 1 FROM index_pending WHERE collection = 'closets' AND id = old.id);
    END;
    """,
    # 3: memories (lifecycle fields, history, full text, index journal) and the temporal
    # knowledge graph.
    """
    CREATE TABLE memories (
        rowid           INTEGER PRIMARY KEY,
        id              TEXT NOT NULL UNIQUE,
        text            TEXT NOT NULL,
        kind            TEXT NOT NULL
            CHECK (kind IN ('fact', 'preference', 'decision', 'summary', 'event')),
        importance      REAL NOT NULL DEFAULT 0.5 CHECK (importance BETWEEN 0 AND 1),
        tags            TEXT NOT NULL DEFAULT '[]',
        user_id         TEXT NOT NULL DEFAULT '',
        agent_id        TEXT,
        session_id      TEXT,
        wing            TEXT NOT NULL DEFAULT '',
        room            TEXT NOT NULL DEFAULT '',
        source_ids      TEXT NOT NULL DEFAULT '[]',
        slot            TEXT,
        origin          TEXT NOT NULL DEFAULT 'explicit',
        created_at      TEXT NOT NULL,
        updated_at      TEXT NOT NULL,
        last_accessed   TEXT,
        access_count    INTEGER NOT NULL DEFAULT 0,
        expires_at      TEXT,
        status          TEXT NOT NULL DEFAULT 'active'
            CHECK (status IN ('active', 'pending', 'superseded', 'archived')),
        superseded_by   TEXT,
        status_at       TEXT NOT NULL,
        ts              REAL NOT NULL,
        metadata        TEXT NOT NULL DEFAULT '{}',
        embedding       BLOB,
        embedding_model TEXT
    );
    CREATE INDEX memories_user ON memories (user_id, status, kind);
    CREATE INDEX memories_slot ON memories (user_id, slot);
    CREATE INDEX memories_superseded_by ON memories (superseded_by);

    -- Every add, update, supersede, delete, archive and restore, as mem0 keeps it. No
    -- foreign key: the history of a deleted memory stays (until its user is forgotten).
    CREATE TABLE memory_history (
        seq        INTEGER PRIMARY KEY AUTOINCREMENT,
        memory_id  TEXT NOT NULL,
        user_id    TEXT NOT NULL DEFAULT '',
        event      TEXT NOT NULL,
        old_text   TEXT,
        new_text   TEXT,
        old_status TEXT,
        new_status TEXT,
        at         TEXT NOT NULL,
        detail     TEXT NOT NULL DEFAULT '{}'
    );
    CREATE INDEX memory_history_memory ON memory_history (memory_id, seq);
    CREATE INDEX memory_history_user ON memory_history (user_id);

    CREATE VIRTUAL TABLE memories_fts USING fts5 (
        text, content = 'memories', content_rowid = 'rowid',
        tokenize = 'unicode61 remove_diacritics 2'
    );
    CREATE VIRTUAL TABLE memories_trigram USING fts5 (
        text, content = 'memories', content_rowid = 'rowid', tokenize = 'trigram'
    );
    CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
        INSERT INTO memories_fts (rowid, text) VALUES (new.rowid, new.text);
        INSERT INTO memories_trigram (rowid, text) VALUES (new.rowid, new.text);
        INSERT INTO index_pending SELECT 'memories', new.id WHERE NOT EXISTS
            (SELECT 1 FROM index_pending WHERE collection = 'memories' AND id = new.id);
    END;
    CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
        INSERT INTO memories_fts (memories_fts, rowid, text)
            VALUES ('delete', old.rowid, old.text);
        INSERT INTO memories_trigram (memories_trigram, rowid, text)
            VALUES ('delete', old.rowid, old.text);
        INSERT INTO index_pending SELECT 'memories', old.id WHERE NOT EXISTS
            (SELECT 1 FROM index_pending WHERE collection = 'memories' AND id = old.id);
    END;
    CREATE TRIGGER memories_au_text AFTER UPDATE OF text ON memories BEGIN
        INSERT INTO memories_fts (memories_fts, rowid, text)
            VALUES ('delete', old.rowid, old.text);
        INSERT INTO memories_trigram (memories_trigram, rowid, text)
            VALUES ('delete', old.rowid, old.text);
        INSERT INTO memories_fts (rowid, text) VALUES (new.rowid, new.text);
        INSERT INTO memories_trigram (rowid, text) VALUES (new.rowid, new.text);
    END;
    -- Only what changes the index entry (vector, status, the filter fields) is journalled:
    -- a recall that bumps access_count must not send the memory back to the index.
    CREATE TRIGGER memories_pending_au AFTER UPDATE OF
        text, embedding, status, user_id, kind, wing, room, ts ON memories BEGIN
        INSERT INTO index_pending SELECT 'memories', new.id WHERE NOT EXISTS
            (SELECT 1 FROM index_pending WHERE collection = 'memories' AND id = new.id);
    END;

    -- The temporal knowledge graph. An entity is keyed by its normalised name per owner;
    -- a triple is open while valid_to is NULL.
    CREATE TABLE entities (
        user_id    TEXT NOT NULL DEFAULT '',
        key        TEXT NOT NULL,
        name       TEXT NOT NULL,
        type       TEXT,
        created_at TEXT NOT NULL,
        PRIMARY KEY (user_id, key)
    );
    CREATE TABLE triples (
        rowid         INTEGER PRIMARY KEY,
        id            TEXT NOT NULL UNIQUE,
        user_id       TEXT NOT NULL DEFAULT '',
        subject       TEXT NOT NULL,
        predicate     TEXT NOT NULL,
        object        TEXT NOT NULL,
        subject_key   TEXT NOT NULL,
        object_key    TEXT NOT NULL,
        valid_from    TEXT,
        valid_to      TEXT,
        confidence    REAL NOT NULL DEFAULT 1.0 CHECK (confidence BETWEEN 0 AND 1),
        source_drawer TEXT,
        source_memory TEXT,
        origin        TEXT NOT NULL DEFAULT 'explicit',
        created_at    TEXT NOT NULL,
        ended_reason  TEXT
    );
    CREATE INDEX triples_subject ON triples (user_id, subject_key, predicate);
    CREATE INDEX triples_object ON triples (user_id, object_key);
    CREATE INDEX triples_drawer ON triples (source_drawer);
    """,
    # 4: drawers looked up by source (the neighbour and drawer-grep stages of a search ask
    # for a source's drawers in chunk order; without this index that was a scan of every
    # drawer of the wing: seconds at 50,000 drawers). The PostgreSQL ledger had it.
    """
    CREATE INDEX drawers_by_source ON drawers (wing, source, chunk_index);
    """,
)

SCHEMA_VERSION = len(MIGRATIONS)
