"""The PostgreSQL ledger's schema, as an ordered list of migrations.

The same tables as the SQLite ledger (:mod:`palace_retrievers.ledger.sqlite.schema`), in one
PostgreSQL schema per palace; every statement runs with ``search_path`` set to that
schema alone, so the names here are unqualified. Migration ``n`` takes a ledger from
version ``n - 1`` to ``n``; a ledger is migrated forward on open, one transaction per
step (PostgreSQL's DDL is transactional: a step is applied whole or not at all), under
the palace's advisory lock so that two processes opening it at once migrate it once.

What differs from SQLite, and why:

- Times are ``timestamptz`` (UTC), not ISO strings; ids and the names that are sorted on
  are ``COLLATE "C"``, so ``ORDER BY id`` is the code-point order Python sorts in.
- Full text: each drawer and memory carries two ``tsvector`` columns written by the
  ledger (see :mod:`palace_retrievers.ledger.postgres.text`): ``words`` (the text's words,
  case and accents folded) and ``grams`` (the trigrams of its Chinese, Japanese and
  Korean runs, as FTS5's trigram table), each with a GIN index. No extension is needed:
  neither ``pg_trgm`` nor ``unaccent``, nor ``vector``.
- Embeddings are ``bytea`` (little-endian float32, as in SQLite): the ledger keeps any
  model's vectors whatever their dimension, and the ``pgvector`` backend keeps its own
  ``vector(n)`` tables, with their HNSW indexes, beside this schema in the same database.
- The vector-index journal (``index_pending``) is written by triggers, in the same
  transaction as the change, as in SQLite. Each row carries a sequence number that a
  new change of the same id raises, so that a writer clearing the ids it has applied
  never clears a change made after it read them (several machines may write).
"""

from __future__ import annotations

MIGRATIONS: tuple[str, ...] = (
    # 1: everything the SQLite ledger has at its version 3.
    """
    CREATE TABLE meta (
        key   text COLLATE "C" PRIMARY KEY,
        value text NOT NULL
    );

    CREATE TABLE sources (
        wing              text COLLATE "C" NOT NULL,
        source_key        text COLLATE "C" NOT NULL,
        location          text NOT NULL,
        content_hash      text NOT NULL,
        mtime             double precision,
        normalize_version integer NOT NULL,
        mined_at          timestamptz NOT NULL,
        drawer_count      integer NOT NULL DEFAULT 0,
        root              text COLLATE "C",
        plugin            text COLLATE "C",
        PRIMARY KEY (wing, source_key)
    );
    CREATE INDEX sources_root ON sources (root, wing);

    CREATE TABLE drawers (
        seq               bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
        id                text COLLATE "C" PRIMARY KEY,
        text              text NOT NULL,
        wing              text COLLATE "C" NOT NULL,
        room              text COLLATE "C" NOT NULL,
        source            text COLLATE "C" NOT NULL,
        source_key        text COLLATE "C",
        chunk_index       integer NOT NULL DEFAULT 0,
        line_start        integer,
        line_end          integer,
        source_mtime      double precision,
        normalize_version integer NOT NULL DEFAULT 0,
        filed_at          timestamptz NOT NULL,
        content_date      timestamptz,
        ts                double precision NOT NULL,
        user_id           text COLLATE "C" NOT NULL DEFAULT '',
        kind              text COLLATE "C" NOT NULL DEFAULT 'drawer',
        metadata          text NOT NULL DEFAULT '{}',
        embedding         bytea,
        embedding_model   text,
        words             tsvector NOT NULL DEFAULT ''::tsvector,
        grams             tsvector NOT NULL DEFAULT ''::tsvector,
        FOREIGN KEY (wing, source_key) REFERENCES sources (wing, source_key)
            ON DELETE CASCADE
    );
    CREATE INDEX drawers_place ON drawers (user_id, wing, room);
    CREATE INDEX drawers_kind ON drawers (user_id, kind);
    CREATE INDEX drawers_source ON drawers (wing, source_key, chunk_index);
    CREATE INDEX drawers_by_source ON drawers (wing, source, chunk_index);
    CREATE INDEX drawers_ts ON drawers (user_id, ts);
    CREATE INDEX drawers_words ON drawers USING gin (words);
    CREATE INDEX drawers_grams ON drawers USING gin (grams);

    CREATE TABLE closets (
        seq             bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
        id              text COLLATE "C" PRIMARY KEY,
        line            text NOT NULL CHECK (char_length(line) <= 1500),
        wing            text COLLATE "C" NOT NULL,
        room            text COLLATE "C" NOT NULL,
        source_key      text COLLATE "C",
        user_id         text COLLATE "C" NOT NULL DEFAULT '',
        extractor       text NOT NULL,
        filed_at        timestamptz NOT NULL,
        ts              double precision NOT NULL,
        embedding       bytea,
        embedding_model text
    );
    CREATE INDEX closets_user ON closets (user_id);
    CREATE TABLE closet_drawers (
        closet_id text COLLATE "C" NOT NULL REFERENCES closets (id) ON DELETE CASCADE,
        drawer_id text COLLATE "C" NOT NULL REFERENCES drawers (id) ON DELETE CASCADE,
        PRIMARY KEY (closet_id, drawer_id)
    );
    CREATE INDEX closet_drawers_drawer ON closet_drawers (drawer_id);

    CREATE TABLE memories (
        seq             bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
        id              text COLLATE "C" PRIMARY KEY,
        text            text NOT NULL,
        kind            text COLLATE "C" NOT NULL
            CHECK (kind IN ('fact', 'preference', 'decision', 'summary', 'event')),
        importance      double precision NOT NULL DEFAULT 0.5
            CHECK (importance BETWEEN 0 AND 1),
        tags            text NOT NULL DEFAULT '[]',
        user_id         text COLLATE "C" NOT NULL DEFAULT '',
        agent_id        text,
        session_id      text,
        wing            text COLLATE "C" NOT NULL DEFAULT '',
        room            text COLLATE "C" NOT NULL DEFAULT '',
        source_ids      text NOT NULL DEFAULT '[]',
        slot            text COLLATE "C",
        origin          text NOT NULL DEFAULT 'explicit',
        created_at      timestamptz NOT NULL,
        updated_at      timestamptz NOT NULL,
        last_accessed   timestamptz,
        access_count    integer NOT NULL DEFAULT 0,
        expires_at      timestamptz,
        status          text COLLATE "C" NOT NULL DEFAULT 'active'
            CHECK (status IN ('active', 'pending', 'superseded', 'archived')),
        superseded_by   text COLLATE "C",
        status_at       timestamptz NOT NULL,
        ts              double precision NOT NULL,
        metadata        text NOT NULL DEFAULT '{}',
        embedding       bytea,
        embedding_model text,
        words           tsvector NOT NULL DEFAULT ''::tsvector,
        grams           tsvector NOT NULL DEFAULT ''::tsvector
    );
    CREATE INDEX memories_user ON memories (user_id, status, kind);
    CREATE INDEX memories_slot ON memories (user_id, slot);
    CREATE INDEX memories_superseded_by ON memories (superseded_by);
    CREATE INDEX memories_words ON memories USING gin (words);
    CREATE INDEX memories_grams ON memories USING gin (grams);

    -- Every add, update, supersede, delete, archive and restore. No foreign key: the
    -- history of a deleted memory stays (until its user is forgotten).
    CREATE TABLE memory_history (
        seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        memory_id  text COLLATE "C" NOT NULL,
        user_id    text COLLATE "C" NOT NULL DEFAULT '',
        event      text NOT NULL,
        old_text   text,
        new_text   text,
        old_status text,
        new_status text,
        at         timestamptz NOT NULL,
        detail     text NOT NULL DEFAULT '{}'
    );
    CREATE INDEX memory_history_memory ON memory_history (memory_id, seq);
    CREATE INDEX memory_history_user ON memory_history (user_id);

    -- The temporal knowledge graph: entities keyed by normalised name per owner; a
    -- triple is open while valid_to is NULL.
    CREATE TABLE entities (
        user_id    text COLLATE "C" NOT NULL DEFAULT '',
        key        text COLLATE "C" NOT NULL,
        name       text NOT NULL,
        type       text,
        created_at timestamptz NOT NULL,
        PRIMARY KEY (user_id, key)
    );
    CREATE TABLE triples (
        seq           bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
        id            text COLLATE "C" PRIMARY KEY,
        user_id       text COLLATE "C" NOT NULL DEFAULT '',
        subject       text NOT NULL,
        predicate     text COLLATE "C" NOT NULL,
        object        text NOT NULL,
        subject_key   text COLLATE "C" NOT NULL,
        object_key    text COLLATE "C" NOT NULL,
        valid_from    timestamptz,
        valid_to      timestamptz,
        confidence    double precision NOT NULL DEFAULT 1.0
            CHECK (confidence BETWEEN 0 AND 1),
        source_drawer text COLLATE "C",
        source_memory text COLLATE "C",
        origin        text NOT NULL DEFAULT 'explicit',
        created_at    timestamptz NOT NULL,
        ended_reason  text
    );
    CREATE INDEX triples_subject ON triples (user_id, subject_key, predicate);
    CREATE INDEX triples_object ON triples (user_id, object_key);
    CREATE INDEX triples_drawer ON triples (source_drawer);
    CREATE INDEX triples_memory ON triples (source_memory);

    -- Ids whose vector-index entry may not match the ledger yet (see the module's
    -- docstring): written by the triggers below in the same transaction as the change.
    CREATE SEQUENCE index_pending_seq;
    CREATE TABLE index_pending (
        collection text COLLATE "C" NOT NULL,
        id         text COLLATE "C" NOT NULL,
        seq        bigint NOT NULL DEFAULT nextval('index_pending_seq'),
        PRIMARY KEY (collection, id)
    );
    -- SET search_path FROM CURRENT: the function finds this palace's index_pending
    -- whatever the search_path of the session whose change fires it.
    CREATE FUNCTION journal_change() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
    BEGIN
        IF TG_OP = 'DELETE' OR (TG_OP = 'UPDATE' AND OLD.id IS DISTINCT FROM NEW.id) THEN
            INSERT INTO index_pending (collection, id) VALUES (TG_ARGV[0], OLD.id)
            ON CONFLICT (collection, id) DO UPDATE SET seq = EXCLUDED.seq;
        END IF;
        IF TG_OP <> 'DELETE' THEN
            INSERT INTO index_pending (collection, id) VALUES (TG_ARGV[0], NEW.id)
            ON CONFLICT (collection, id) DO UPDATE SET seq = EXCLUDED.seq;
        END IF;
        RETURN NULL;
    END
    $$;
    CREATE TRIGGER drawers_journal AFTER INSERT OR DELETE ON drawers
        FOR EACH ROW EXECUTE FUNCTION journal_change('drawers');
    -- An update journals a drawer when it touches its index entry (an upsert sets every
    -- column), not when only its full text is rebuilt.
    CREATE TRIGGER drawers_journal_update AFTER UPDATE OF
        id, text, wing, room, source, user_id, kind, ts, embedding ON drawers
        FOR EACH ROW EXECUTE FUNCTION journal_change('drawers');
    CREATE TRIGGER closets_journal AFTER INSERT OR UPDATE OR DELETE ON closets
        FOR EACH ROW EXECUTE FUNCTION journal_change('closets');
    CREATE TRIGGER memories_journal AFTER INSERT OR DELETE ON memories
        FOR EACH ROW EXECUTE FUNCTION journal_change('memories');
    -- Only what changes the index entry (vector, status, the filter fields) journals an
    -- update: a recall that bumps access_count must not send the memory back to the index.
    CREATE TRIGGER memories_journal_update AFTER UPDATE OF
        id, text, embedding, status, user_id, kind, wing, room, ts ON memories
        FOR EACH ROW EXECUTE FUNCTION journal_change('memories');

    INSERT INTO meta VALUES ('generation', '0');
    -- The version of postgres_text that wrote the words and grams columns.
    INSERT INTO meta VALUES ('lexical_version', '1');
    """,
)

SCHEMA_VERSION = len(MIGRATIONS)
