"""The ledger's schema, described once for both dialects (the words: :mod:`.ddl`).

Step 1: drawers, sources, closets and the drawers' full text. Step 2: where each source
was mined from, and the vector-index journal. Step 3: memories with their history and
full text, and the temporal knowledge graph. Step 4: drawers looked up by source (the
neighbour and drawer-grep stages of a search ask for a source's drawers in chunk order;
without that index it was a scan of every drawer of the wing: seconds at 50,000 drawers).
Step 5 (SQLite only): the character pairs of the Chinese, Japanese and Korean text of
drawers and memories, and the words written against it, searched beside its trigrams
(most Chinese words are two characters, which a trigram index never finds; FTS5 reads
``在学PMP`` as one word; the PostgreSQL ledger cuts words apart from such runs itself and
keeps the pairs in its ``grams`` column, cut again when its text version changes).

A part of a step that ledgers already have is never changed: a change is a new step
(``tests/test_ledger_schema.py`` holds what is rendered to the DDL existing ledgers were
made with). The two ledgers differ in a few indexes, each marked with the one that has
it: the PostgreSQL ledger, written later for palaces shared by many users, leads its
drawer indexes with the owner.
"""

from __future__ import annotations

from palace_retrievers.ledger.sql.ddl import (
    Check,
    Column,
    FullText,
    Index,
    Pairs,
    Part,
    Row,
    Table,
    Type,
    Watch,
)

TEXT, KEY, INT, REAL, TIME, BYTES, COUNTER = Type


def _text(name: str, default: str | None = None, *, null: bool = False) -> Column:
    return Column(name, TEXT, null=null, default=default)


def _key(name: str, default: str | None = None, *, null: bool = False) -> Column:
    return Column(name, KEY, null=null, default=default)


_ID = Column("id", KEY, primary=True)
_OWNER = _key("user_id", "''")
_EMBEDDING = (Column("embedding", BYTES, null=True), _text("embedding_model", null=True))

MEMORY_KINDS = ("fact", "preference", "decision", "summary", "event")
MEMORY_STATUSES = ("active", "pending", "superseded", "archived")

SCHEMA: tuple[Part, ...] = (
    # -- step 1 ---------------------------------------------------------------------------
    Table("meta", (Column("key", KEY, primary=True), _text("value"))),
    Table(
        "sources",
        (
            _key("wing"),
            _key("source_key"),
            _text("location"),
            _text("content_hash"),
            Column("mtime", REAL, null=True),
            Column("normalize_version", INT),
            Column("mined_at", TIME),
            Column("drawer_count", INT, default="0"),
            Column("root", KEY, null=True, since=2),
            Column("plugin", KEY, null=True, since=2),
        ),
        primary=("wing", "source_key"),
    ),
    Table(
        "drawers",
        (
            _ID,
            _text("text"),
            _key("wing"),
            _key("room"),
            _key("source"),
            _key("source_key", null=True),
            Column("chunk_index", INT, default="0"),
            Column("line_start", INT, null=True),
            Column("line_end", INT, null=True),
            Column("source_mtime", REAL, null=True),
            Column("normalize_version", INT, default="0"),
            Column("filed_at", TIME),
            Column("content_date", TIME, null=True),
            Column("ts", REAL),
            _OWNER,
            _key("kind", "'drawer'"),
            _text("metadata", "'{}'"),
            *_EMBEDDING,
        ),
        foreign=(
            "FOREIGN KEY (wing, source_key) REFERENCES sources (wing, source_key) "
            "ON DELETE CASCADE",
        ),
        numbered=True,
    ),
    Index("drawers_wing_room", "drawers", ("wing", "room"), only="sqlite"),
    Index("drawers_user", "drawers", ("user_id", "kind"), only="sqlite"),
    Index("drawers_ts", "drawers", ("ts",), only="sqlite"),
    Index("drawers_place", "drawers", ("user_id", "wing", "room"), only="postgres"),
    Index("drawers_kind", "drawers", ("user_id", "kind"), only="postgres"),
    Index("drawers_ts", "drawers", ("user_id", "ts"), only="postgres"),
    Index("drawers_source", "drawers", ("wing", "source_key", "chunk_index")),
    Table(
        "closets",
        (
            _ID,
            Column("line", TEXT, check=Check(longest=1500)),
            _key("wing"),
            _key("room"),
            _key("source_key", null=True),
            _OWNER,
            _text("extractor"),
            Column("filed_at", TIME),
            Column("ts", REAL),
            *_EMBEDDING,
        ),
        numbered=True,
    ),
    Index("closets_user", "closets", ("user_id",), only="postgres"),
    Table(
        "closet_drawers",
        (
            Column("closet_id", KEY, references="closets (id) ON DELETE CASCADE"),
            Column("drawer_id", KEY, references="drawers (id) ON DELETE CASCADE"),
        ),
        primary=("closet_id", "drawer_id"),
    ),
    Index("closet_drawers_drawer", "closet_drawers", ("drawer_id",)),
    FullText("drawers"),
    Row("meta", ("generation", "0")),
    # The version of the PostgreSQL ledger's own cutting of text into words and grams
    # (palace_retrievers.ledger.postgres.text) that wrote the full-text columns.
    Row("meta", ("lexical_version", "1"), only="postgres"),
    # -- step 2 ---------------------------------------------------------------------------
    Index("sources_root", "sources", ("root", "wing"), since=2),
    # Ids whose vector-index entry may not match the ledger yet. Triggers write them in
    # the same transaction as the change; they are cleared once the index has caught up,
    # so whatever a killed writer left behind is replayed by the next one.
    Table(
        "index_pending",
        (_key("collection"), _key("id")),
        ("collection", "id"),
        journal=True,
        since=2,
    ),
    # SQLite journals every update of a drawer; PostgreSQL, whose drawer rows carry their
    # full text, only an update of what the index entry holds (an upsert sets every
    # column), not a rebuild of the full text.
    Watch("drawers", since=2, only="sqlite"),
    Watch(
        "drawers",
        ("text", "wing", "room", "source", "user_id", "kind", "ts", "embedding"),
        only="postgres",
    ),
    Watch("closets", since=2),
    # -- step 3 ---------------------------------------------------------------------------
    Table(
        "memories",
        (
            _ID,
            _text("text"),
            Column("kind", KEY, check=Check(values=MEMORY_KINDS)),
            Column("importance", REAL, default="0.5", check=Check(between=("0", "1"))),
            _text("tags", "'[]'"),
            _OWNER,
            _text("agent_id", null=True),
            _text("session_id", null=True),
            _key("wing", "''"),
            _key("room", "''"),
            _text("source_ids", "'[]'"),
            _key("slot", null=True),
            _text("origin", "'explicit'"),
            Column("created_at", TIME),
            Column("updated_at", TIME),
            Column("last_accessed", TIME, null=True),
            Column("access_count", INT, default="0"),
            Column("expires_at", TIME, null=True),
            Column("status", KEY, default="'active'", check=Check(values=MEMORY_STATUSES)),
            _key("superseded_by", null=True),
            Column("status_at", TIME),
            Column("ts", REAL),
            _text("metadata", "'{}'"),
            *_EMBEDDING,
        ),
        numbered=True,
        since=3,
    ),
    Index("memories_user", "memories", ("user_id", "status", "kind"), since=3),
    Index("memories_slot", "memories", ("user_id", "slot"), since=3),
    Index("memories_superseded_by", "memories", ("superseded_by",), since=3),
    # Every add, update, supersede, delete, archive and restore, as mem0 keeps it. No
    # foreign key: the history of a deleted memory stays (until its user is forgotten).
    Table(
        "memory_history",
        (
            Column("seq", COUNTER, primary=True),
            _key("memory_id"),
            _OWNER,
            _text("event"),
            _text("old_text", null=True),
            _text("new_text", null=True),
            _text("old_status", null=True),
            _text("new_status", null=True),
            Column("at", TIME),
            _text("detail", "'{}'"),
        ),
        since=3,
    ),
    Index("memory_history_memory", "memory_history", ("memory_id", "seq"), since=3),
    Index("memory_history_user", "memory_history", ("user_id",), since=3),
    FullText("memories", since=3),
    # Only what changes the index entry (vector, status, the filter fields) journals an
    # update: a recall that bumps access_count must not send the memory back to the index.
    Watch(
        "memories",
        ("text", "embedding", "status", "user_id", "kind", "wing", "room", "ts"),
        since=3,
    ),
    # The temporal knowledge graph. An entity is keyed by its normalised name per owner;
    # a triple is open while valid_to is NULL.
    Table(
        "entities",
        (_OWNER, _key("key"), _text("name"), _text("type", null=True), Column("created_at", TIME)),
        primary=("user_id", "key"),
        since=3,
    ),
    Table(
        "triples",
        (
            _ID,
            _OWNER,
            _text("subject"),
            _key("predicate"),
            _text("object"),
            _key("subject_key"),
            _key("object_key"),
            Column("valid_from", TIME, null=True),
            Column("valid_to", TIME, null=True),
            Column("confidence", REAL, default="1.0", check=Check(between=("0", "1"))),
            _key("source_drawer", null=True),
            _key("source_memory", null=True),
            _text("origin", "'explicit'"),
            Column("created_at", TIME),
            _text("ended_reason", null=True),
        ),
        numbered=True,
        since=3,
    ),
    Index("triples_subject", "triples", ("user_id", "subject_key", "predicate"), since=3),
    Index("triples_object", "triples", ("user_id", "object_key"), since=3),
    Index("triples_drawer", "triples", ("source_drawer",), since=3),
    Index("triples_memory", "triples", ("source_memory",), only="postgres"),
    # -- step 4 ---------------------------------------------------------------------------
    Index("drawers_by_source", "drawers", ("wing", "source", "chunk_index"), since=4),
    # -- step 5 ---------------------------------------------------------------------------
    Pairs("drawers", since=5, only="sqlite"),
    Pairs("memories", since=5, only="sqlite"),
    # The version of the cutting into pairs that wrote the pairs columns (the SQLite
    # ledger cuts the pairs of the rows of before when it migrates to step 5, and sets it).
    Row("meta", ("lexical_version", "0"), since=5, only="sqlite"),
)

#: The tables whose text is searched (both dialects').
FULL_TEXT_TABLES = tuple(part.table for part in SCHEMA if isinstance(part, FullText))
